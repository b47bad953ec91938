/* Clone to CPU: packet_in/packet_out controller headers, a punt table that clones to a
 * session, a digest of learned MACs, and packet_out handling from the CPU port. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

#define CPU_PORT 510
#define CPU_CLONE_SESSION 100

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

struct mac_learn_t {
    mac_t  src;
    bit<9> port;
}

struct metadata {
    @field_list(1)
    bit<9> ingress_port;
    bit<1> punted;
}

struct headers {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
}

parser CpuParser(packet_in pkt, out headers hdr, inout metadata meta,
                 inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control CpuVerify(inout headers hdr, inout metadata meta) { apply { } }

control CpuIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action punt() {
        meta.ingress_port = sm.ingress_port;
        clone_preserving_field_list(CloneType.I2E, CPU_CLONE_SESSION, 1);
    }
    action learn() {
        digest<mac_learn_t>(1, { hdr.ethernet.src, sm.ingress_port });
    }
    action set_out(bit<9> port) { sm.egress_spec = port; }

    table punt_table {
        key = {
            hdr.ethernet.ether_type : ternary;
            hdr.ethernet.dst        : ternary;
        }
        actions = { punt; NoAction; }
        default_action = NoAction();
    }
    table smac {
        key = { hdr.ethernet.src : exact; }
        actions = { learn; NoAction; }
        default_action = learn();
    }
    table dmac {
        key = { hdr.ethernet.dst : exact; }
        actions = { set_out; NoAction; }
        const default_action = NoAction();
    }
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        smac.apply();
        if (!dmac.apply().hit) {
            punt_table.apply();
        }
    }
}

control CpuEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (sm.instance_type == 1) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control CpuCompute(inout headers hdr, inout metadata meta) { apply { } }

control CpuDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(CpuParser(), CpuVerify(), CpuIngress(), CpuEgress(), CpuCompute(), CpuDeparser()) main;

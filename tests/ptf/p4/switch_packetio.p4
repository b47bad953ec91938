/* Packet I/O for the p4sim switch PTF suite.
 * - fwd: exact on ingress port -> egress port (normal forwarding), optionally rewriting the
 *   source MAC (an ingress modification an ingress-to-egress clone must not carry);
 * - punt (ternary on ethertype): clone_to_cpu clones the frame to the CPU clone session while
 *   it is still forwarded (reason 1), send_to_cpu sends it only to the CPU port (reason 2);
 * - tag (exact on source MAC), applied after punt, may overwrite the reason: a preserved field
 *   list carries the *final* ingress values to the clone;
 * - frames reaching the CPU port get the packet_in header with their original ingress port and
 *   the reason (both kept across the clone with field list 1);
 * - frames from the CPU port carry the packet_out header whose egress_port picks the port. */
#include <core.p4>
#include <v1model.p4>
#include "switch_headers.p4"

#ifndef CPU_PORT
#define CPU_PORT 510
#endif
const bit<32> CPU_CLONE_SESSION = 100;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> reason;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

struct headers_t {
    packet_in_t  packet_in;
    packet_out_t packet_out;
    ethernet_t   ethernet;
}

struct metadata_t {
    @field_list(1)
    port_t ingress_port;
    @field_list(1)
    bit<7> reason;
}

parser SwParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t smeta) {
    state start {
        transition select(smeta.ingress_port) {
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

control SwVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SwIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t smeta) {
    action drop() {
        mark_to_drop(smeta);
    }
    action forward(port_t port) {
        smeta.egress_spec = port;
    }
    action forward_rewrite(port_t port, mac_t src_mac) {
        smeta.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
    }
    action clone_to_cpu() {
        meta.ingress_port = smeta.ingress_port;
        meta.reason = 1;
        clone_preserving_field_list(CloneType.I2E, CPU_CLONE_SESSION, 1);
    }
    action send_to_cpu() {
        meta.ingress_port = smeta.ingress_port;
        meta.reason = 2;
        smeta.egress_spec = CPU_PORT;
    }
    action set_reason(bit<7> reason) {
        meta.reason = reason;
    }

    table fwd {
        key = { smeta.ingress_port: exact; }
        actions = { forward; forward_rewrite; drop; }
        default_action = drop();
        size = 16;
    }
    table punt {
        key = { hdr.ethernet.ether_type: ternary; }
        actions = { clone_to_cpu; send_to_cpu; NoAction; }
        default_action = NoAction();
        size = 16;
    }
    table tag {
        key = { hdr.ethernet.src_addr: exact; }
        actions = { set_reason; NoAction; }
        default_action = NoAction();
        size = 16;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            smeta.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            fwd.apply();
            punt.apply();
            tag.apply();
        }
    }
}

control SwEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t smeta) {
    apply {
        if (smeta.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = meta.ingress_port;
            hdr.packet_in.reason = meta.reason;
        }
    }
}

control SwComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(SwParser(), SwVerifyChecksum(), SwIngress(), SwEgress(), SwComputeChecksum(),
         SwDeparser()) main;

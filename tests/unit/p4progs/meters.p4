/* Meters: an indirect meter indexed by ingress port, a direct meter on a policer table, and
 * a switch on the table's action_run. Red packets are dropped. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

enum bit<2> Color {
    GREEN = 0,
    YELLOW = 1,
    RED = 2
}

struct metadata {
    bit<2> port_color;
    bit<2> flow_color;
    bit<8> class;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

parser MParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
    }
}

control MVerify(inout headers hdr, inout metadata meta) { apply { } }

control MIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    meter(64, MeterType.bytes) port_meter;
    direct_meter<bit<2>>(MeterType.packets) flow_meter;

    action police(bit<8> class) {
        flow_meter.read(meta.flow_color);
        meta.class = class;
    }
    action unpoliced() { flow_meter.read(meta.flow_color); }

    table policer {
        key = { hdr.ipv4.src: exact; hdr.ipv4.dscp: exact; }
        actions = { police; unpoliced; }
        meters = flow_meter;
        default_action = unpoliced();
    }
    apply {
        port_meter.execute_meter((bit<32>)sm.ingress_port, meta.port_color);
        switch (policer.apply().action_run) {
            police: {
                if (meta.flow_color == (bit<2>)Color.RED) {
                    mark_to_drop(sm);
                }
            }
            default: {
                sm.egress_spec = 1;
            }
        }
        if (meta.port_color == 2) {
            mark_to_drop(sm);
        }
    }
}

control MEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control MCompute(inout headers hdr, inout metadata meta) { apply { } }

control MDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(MParser(), MVerify(), MIngress(), MEgress(), MCompute(), MDeparser()) main;

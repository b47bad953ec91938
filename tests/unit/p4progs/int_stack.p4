/* Header-stack telemetry: a UDP shim carries a stack of per-hop records; each switch pushes
 * its own record at egress (INT-like, stack of up to 4 hops). */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

#define MAX_HOPS 4
const bit<16> TELEMETRY_PORT = 5000;

header shim_t {
    bit<8> hop_count;
    bit<8> next_proto;
}

header hop_t {
    bit<1>  bos;
    bit<7>  switch_id;
    bit<9>  ingress_port;
    bit<9>  egress_port;
    bit<19> qdepth;
    bit<3>  pad;
    bit<32> hop_latency;
}

struct metadata {
    bit<8>  parsed_hops;
    bit<7>  switch_id;
}

struct headers {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    udp_t          udp;
    shim_t         shim;
    hop_t[MAX_HOPS] hops;
}

parser IntParser(packet_in pkt, out headers hdr, inout metadata meta,
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
        transition select(hdr.ipv4.protocol, hdr.ipv4.frag_offset) {
            (IP_PROTO_UDP, 0): parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            TELEMETRY_PORT: parse_shim;
            default: accept;
        }
    }
    state parse_shim {
        pkt.extract(hdr.shim);
        meta.parsed_hops = 0;
        transition select(hdr.shim.hop_count) {
            0: accept;
            default: parse_hop;
        }
    }
    state parse_hop {
        pkt.extract(hdr.hops.next);
        meta.parsed_hops = meta.parsed_hops + 1;
        transition select(hdr.hops.last.bos) {
            1: accept;
            default: parse_hop;
        }
    }
}

control IntVerify(inout headers hdr, inout metadata meta) { apply { } }

control IntIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table fwd {
        key = { hdr.ipv4.dst: lpm; }
        actions = { set_port; drop; }
        default_action = drop();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            fwd.apply();
        }
    }
}

control IntEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action set_switch_id(bit<7> id) { meta.switch_id = id; }
    table switch_config {
        actions = { set_switch_id; }
        default_action = set_switch_id(1);
    }
    action push_hop() {
        hdr.hops.push_front(1);
        hdr.hops[0].setValid();
        hdr.hops[0].bos = (hdr.shim.hop_count == 0 ? 1w1 : 1w0);
        hdr.hops[0].switch_id = meta.switch_id;
        hdr.hops[0].ingress_port = sm.ingress_port;
        hdr.hops[0].egress_port = sm.egress_port;
        hdr.hops[0].qdepth = sm.deq_qdepth;
        hdr.hops[0].pad = 0;
        hdr.hops[0].hop_latency = sm.deq_timedelta;
        hdr.shim.hop_count = hdr.shim.hop_count |+| 1;
        hdr.ipv4.total_len = hdr.ipv4.total_len + 10;
        hdr.udp.length = hdr.udp.length + 10;
    }
    apply {
        if (hdr.shim.isValid() && hdr.shim.hop_count < MAX_HOPS) {
            switch_config.apply();
            push_hop();
        }
    }
}

control IntCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control IntDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.shim);
        pkt.emit(hdr.hops);
    }
}

V1Switch(IntParser(), IntVerify(), IntIngress(), IntEgress(), IntCompute(), IntDeparser()) main;

/* ECMP: an action selector hashes the 5-tuple to pick a next hop; the group id is set by an
 * LPM route. A hash() into metadata is also computed for a per-flow counter index. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

struct metadata {
    bit<16> flow_hash;
    bit<16> l4_src;
    bit<16> l4_dst;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
}

parser EcmpParser(packet_in pkt, out headers hdr, inout metadata meta,
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
        transition select(hdr.ipv4.protocol) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }
    state parse_udp {
        pkt.extract(hdr.udp);
        meta.l4_src = hdr.udp.src_port;
        meta.l4_dst = hdr.udp.dst_port;
        transition accept;
    }
}

control EcmpVerify(inout headers hdr, inout metadata meta) { apply { } }

control EcmpIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) ecmp_selector;

    action set_nhop(mac_t dmac, bit<9> port) {
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = dmac;
        sm.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action drop() { mark_to_drop(sm); }

    table ecmp_nhop {
        key = {
            hdr.ipv4.dst      : lpm;
            hdr.ipv4.src      : selector;
            hdr.ipv4.dst      : selector;
            hdr.ipv4.protocol : selector;
            meta.l4_src       : selector;
            meta.l4_dst       : selector;
        }
        actions = { set_nhop; drop; }
        implementation = ecmp_selector;
        size = 256;
    }

    apply {
        hash(meta.flow_hash, HashAlgorithm.crc16, (bit<16>)0,
             { hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.protocol, meta.l4_src, meta.l4_dst },
             (bit<32>)65536);
        if (hdr.ipv4.isValid()) {
            ecmp_nhop.apply();
        }
    }
}

control EcmpEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control EcmpCompute(inout headers hdr, inout metadata meta) { apply { } }

control EcmpDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(EcmpParser(), EcmpVerify(), EcmpIngress(), EcmpEgress(), EcmpCompute(),
         EcmpDeparser()) main;

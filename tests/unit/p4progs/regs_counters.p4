/* Registers and counters: a per-port packet counter (indirect), a direct counter on an ACL
 * table with ternary/range/optional keys and const entries, and a register that keeps the
 * last seen IPv4 TTL per ingress port plus a round-robin index. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

struct metadata {
    bit<32> rr_index;
    bit<8>  last_ttl;
    bool    acl_hit;
}

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
}

parser RcParser(packet_in pkt, out headers hdr, inout metadata meta,
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
        transition accept;
    }
}

control RcVerify(inout headers hdr, inout metadata meta) { apply { } }

control RcIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) port_pkts;
    direct_counter(CounterType.packets) acl_hits;
    register<bit<8>>(512) last_ttl;
    register<bit<32>>(1) rr;

    action allow() { meta.acl_hit = true; acl_hits.count(); }
    action deny() { mark_to_drop(sm); meta.acl_hit = true; acl_hits.count(); }

    table acl {
        key = {
            hdr.ipv4.src      : ternary;
            hdr.ipv4.protocol : optional;
            hdr.udp.dst_port  : range;
        }
        actions = { allow; deny; }
        counters = acl_hits;
        default_action = allow();
        const entries = {
            (0x0a000000 &&& 0xff000000, IP_PROTO_UDP, 0 .. 1023) : deny();
            (_, _, 5000 .. 5010) : allow();
        }
    }

    apply {
        port_pkts.count((bit<32>)sm.ingress_port);
        if (hdr.ipv4.isValid()) {
            last_ttl.read(meta.last_ttl, (bit<32>)sm.ingress_port);
            last_ttl.write((bit<32>)sm.ingress_port, hdr.ipv4.ttl);
            rr.read(meta.rr_index, 0);
            rr.write(0, meta.rr_index + 1);
            if (hdr.udp.isValid()) {
                acl.apply();
            }
        }
        sm.egress_spec = (bit<9>)(meta.rr_index & 3);
    }
}

control RcEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control RcCompute(inout headers hdr, inout metadata meta) { apply { } }

control RcDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
    }
}

V1Switch(RcParser(), RcVerify(), RcIngress(), RcEgress(), RcCompute(), RcDeparser()) main;

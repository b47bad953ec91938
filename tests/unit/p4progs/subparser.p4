/* A sub-parser for the UDP part, applied from the main parser (inlined like p4c does). */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

struct metadata { bit<16> dport; }

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
}

parser UdpParser(packet_in pkt, out udp_t udp, inout metadata meta) {
    state start {
        pkt.extract(udp);
        meta.dport = udp.dst_port;
        transition select(udp.dst_port) {
            0: reject;
            default: accept;
        }
    }
}

parser SParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    UdpParser() udp_parser;
    state start {
        pkt.extract(hdr.ethernet);
        pkt.extract(hdr.ipv4);
        udp_parser.apply(pkt, hdr.udp, meta);
        meta.dport = meta.dport + 1;
        transition accept;
    }
}

control SVerify(inout headers hdr, inout metadata meta) { apply { } }

control SIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 3;
        hdr.udp.src_port = meta.dport;
    }
}

control SEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control SCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum_with_payload(hdr.udp.isValid(),
            { hdr.ipv4.src, hdr.ipv4.dst, 8w0, hdr.ipv4.protocol, hdr.udp.length,
              hdr.udp.src_port, hdr.udp.dst_port, hdr.udp.length, 16w0 },
            hdr.udp.checksum, HashAlgorithm.csum16);
    }
}

control SDeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(SParser(), SVerify(), SIngress(), SEgress(), SCompute(), SDeparser()) main;

/* A header union: one of two tunnel headers, chosen by the EtherType. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

header short_tag_t { bit<16> id; }
header long_tag_t  { bit<32> id; bit<16> flags; }

header_union tag_u {
    short_tag_t s;
    long_tag_t  l;
}

struct metadata { bit<32> tag_id; }

struct headers {
    ethernet_t ethernet;
    tag_u      tag;
}

parser UParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x9001: parse_short;
            0x9002: parse_long;
            default: accept;
        }
    }
    state parse_short { pkt.extract(hdr.tag.s); transition accept; }
    state parse_long { pkt.extract(hdr.tag.l); transition accept; }
}

control UVerify(inout headers hdr, inout metadata meta) { apply { } }

control UIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        if (hdr.tag.s.isValid()) {
            meta.tag_id = (bit<32>)hdr.tag.s.id;
            hdr.tag.l.setValid();
            hdr.tag.l.id = meta.tag_id + 1;
            hdr.tag.l.flags = 0;
            hdr.ethernet.ether_type = 0x9002;
        } else if (!hdr.tag.isValid()) {
            mark_to_drop(sm);
        }
    }
}

control UEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control UCompute(inout headers hdr, inout metadata meta) { apply { } }

control UDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tag);
    }
}

V1Switch(UParser(), UVerify(), UIngress(), UEgress(), UCompute(), UDeparser()) main;

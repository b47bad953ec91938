/* IPv4 options in a varbit field: the length comes from the IHL. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

header ipv4_options_t {
    varbit<320> options;
}

struct metadata { }

struct headers {
    ethernet_t     ethernet;
    ipv4_t         ipv4;
    ipv4_options_t ipv4_options;
    udp_t          udp;
}

parser OParser(packet_in pkt, out headers hdr, inout metadata meta,
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
        verify(hdr.ipv4.ihl >= 5, error.HeaderTooShort);
        pkt.extract(hdr.ipv4_options, (bit<32>)(((bit<16>)hdr.ipv4.ihl - 5) * 32));
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

control OVerify(inout headers hdr, inout metadata meta) { apply { } }

control OIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.udp.isValid()) {
            hdr.udp.dst_port = hdr.udp.dst_port + 1;
        }
    }
}

control OEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply { }
}

control OCompute(inout headers hdr, inout metadata meta) { apply { } }

control ODeparser(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr); }
}

V1Switch(OParser(), OVerify(), OIngress(), OEgress(), OCompute(), ODeparser()) main;

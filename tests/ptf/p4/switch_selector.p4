/* Action selector for the p4sim switch PTF suite: IPv4/UDP flows to a prefix are spread over
 * the members of a group by a crc16 hash of the 5-tuple; each member sends out of one port.
 * Members with a watch port are skipped (by the P4Runtime server) while that port is down. */
#include <core.p4>
#include <v1model.p4>
#include "switch_headers.p4"

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
    udp_t      udp;
}

struct metadata_t { }

parser SwParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t smeta) {
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

control SwVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SwIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t smeta) {
    action_selector(HashAlgorithm.crc16, 32w1024, 32w14) ecmp_selector;

    action set_next_hop(port_t port, mac_t src_mac) {
        smeta.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
    }

    table ecmp {
        key = {
            hdr.ipv4.dst_addr: lpm;
            hdr.ipv4.src_addr: selector;
            hdr.ipv4.protocol: selector;
            hdr.udp.src_port: selector;
            hdr.udp.dst_port: selector;
        }
        actions = { set_next_hop; }
        implementation = ecmp_selector;
        size = 64;
    }

    apply {
        // an indirect table's default action cannot be set over P4Runtime: drop misses here
        mark_to_drop(smeta);
        if (hdr.udp.isValid()) {
            ecmp.apply();
        }
    }
}

control SwEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t smeta) {
    apply { }
}

control SwComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.udp);
    }
}

V1Switch(SwParser(), SwVerifyChecksum(), SwIngress(), SwEgress(), SwComputeChecksum(),
         SwDeparser()) main;

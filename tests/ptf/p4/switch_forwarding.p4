/* Forwarding for the p4sim switch PTF suite: exact (L2), ternary (ACL with priorities) and LPM
 * (IPv4 routes) tables, a default action the controller can change, and routing that rewrites
 * MACs, decrements the TTL and recomputes the IPv4 header checksum. Frames arriving with a bad
 * IPv4 header checksum are dropped (v1model verify_checksum -> standard_metadata.checksum_error). */
#include <core.p4>
#include <v1model.p4>
#include "switch_headers.p4"

struct headers_t {
    ethernet_t ethernet;
    ipv4_t     ipv4;
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
        transition accept;
    }
}

control SwVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control SwIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t smeta) {
    action drop() {
        mark_to_drop(smeta);
    }
    action l2_forward(port_t port) {
        smeta.egress_spec = port;
    }
    /* Unrouted IPv4 leaves unchanged on a port the controller chooses. */
    action unrouted(port_t port) {
        smeta.egress_spec = port;
    }
    action route(port_t port, mac_t src_mac, mac_t dst_mac) {
        smeta.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action acl_forward(port_t port) {
        smeta.egress_spec = port;
    }
    action acl_drop() {
        mark_to_drop(smeta);
    }

    table l2_exact {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { l2_forward; drop; }
        default_action = drop();
        size = 64;
    }
    table acl {
        key = {
            hdr.ipv4.src_addr: ternary;
            hdr.ipv4.dst_addr: ternary;
            hdr.ipv4.protocol: ternary;
        }
        actions = { acl_forward; acl_drop; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm; }
        actions = { route; unrouted; drop; }
        default_action = drop();
        size = 64;
    }

    apply {
        if (smeta.checksum_error == 1) {
            drop();
        } else if (hdr.ipv4.isValid()) {
            if (!acl.apply().hit) {
                ipv4_lpm.apply();
            }
        } else {
            l2_exact.apply();
        }
    }
}

control SwEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t smeta) {
    apply { }
}

control SwComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control SwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(SwParser(), SwVerifyChecksum(), SwIngress(), SwEgress(), SwComputeChecksum(),
         SwDeparser()) main;

/* Multicast for the p4sim switch PTF suite: a destination MAC selects a multicast group; the
 * packet replication engine makes one copy per replica, and egress writes each copy's
 * egress_rid (the replica's instance) and egress port into the probe header. */
#include <core.p4>
#include <v1model.p4>
#include "switch_headers.p4"

struct headers_t {
    ethernet_t ethernet;
    probe_t    probe;
}

struct metadata_t { }

parser SwParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_probe {
        pkt.extract(hdr.probe);
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
    action set_mcast_grp(bit<16> grp) {
        smeta.mcast_grp = grp;
    }
    table mcast {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { set_mcast_grp; drop; }
        default_action = drop();
        size = 16;
    }
    apply {
        mcast.apply();
    }
}

control SwEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t smeta) {
    apply {
        if (hdr.probe.isValid()) {
            hdr.probe.rid = smeta.egress_rid;
            hdr.probe.egress_port = (bit<16>) smeta.egress_port;
        }
    }
}

control SwComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
    }
}

V1Switch(SwParser(), SwVerifyChecksum(), SwIngress(), SwEgress(), SwComputeChecksum(),
         SwDeparser()) main;

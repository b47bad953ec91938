/* Queues for the p4sim switch PTF suite: frames are forwarded by ingress port, and egress
 * copies the queue depth the frame saw when it was enqueued (enq_qdepth) and when it left
 * (deq_qdepth), both in packets, and its enqueue time and time spent queued (enq_timestamp,
 * deq_timedelta), both in microseconds as simple_switch counts them, into the probe header. */
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
    action forward(port_t port) {
        smeta.egress_spec = port;
    }
    /* Into priority queue ``prio`` of the port (simple_switch --priority-queues N). */
    action forward_priority(port_t port, bit<3> prio) {
        smeta.egress_spec = port;
        smeta.priority = prio;
    }
    table fwd {
        key = { smeta.ingress_port: exact; }
        actions = { forward; forward_priority; drop; }
        default_action = drop();
        size = 16;
    }
    apply {
        fwd.apply();
    }
}

control SwEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t smeta) {
    apply {
        if (hdr.probe.isValid()) {
            hdr.probe.enq_qdepth = (bit<32>) smeta.enq_qdepth;
            hdr.probe.deq_qdepth = (bit<32>) smeta.deq_qdepth;
            hdr.probe.egress_port = (bit<16>) smeta.egress_port;
            hdr.probe.enq_timestamp = smeta.enq_timestamp;
            hdr.probe.deq_timedelta = smeta.deq_timedelta;
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

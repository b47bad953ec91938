/* Counters and registers for the p4sim switch PTF suite.
 * - fwd (exact on the destination MAC) with a direct packets-and-bytes counter;
 * - port_rx: indirect packets-and-bytes counter indexed by ingress port (every frame);
 * - port_tx: indirect packets counter indexed by egress port (every frame leaving);
 * - rx_seq: register counting probe frames per ingress port; the new count is written into the
 *   probe's seq field, so the data plane's register updates are visible on the wire;
 * - last_ipv4_id: register written by every IPv4 frame (its identification) and read into the
 *   probe's stamp field by probe frames;
 * - parse_errors: frames whose parsing failed reach ingress with parser_error set (v1model does
 *   not drop them by itself); they are counted (index 0: PacketTooShort, 1: any other error)
 *   and dropped here. */
#include <core.p4>
#include <v1model.p4>
#include "switch_headers.p4"

struct headers_t {
    ethernet_t ethernet;
    probe_t    probe;
    ipv4_t     ipv4;
}

struct metadata_t { }

parser SwParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t smeta) {
    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_PROBE: parse_probe;
            default: accept;
        }
    }
    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        transition accept;
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
    direct_counter(CounterType.packets_and_bytes) fwd_counter;
    counter(512, CounterType.packets_and_bytes) port_rx;
    register<bit<32>>(512) rx_seq;
    register<bit<32>>(1) last_ipv4_id;
    counter(2, CounterType.packets) parse_errors;

    action forward(port_t port) {
        smeta.egress_spec = port;
    }
    action drop() {
        mark_to_drop(smeta);
    }
    table fwd {
        key = { hdr.ethernet.dst_addr: exact; }
        actions = { forward; drop; }
        default_action = drop();
        counters = fwd_counter;
        size = 64;
    }

    apply {
        port_rx.count((bit<32>) smeta.ingress_port);
        if (smeta.parser_error == error.PacketTooShort) {
            parse_errors.count(0);
            drop();
        } else if (smeta.parser_error != error.NoError) {
            parse_errors.count(1);
            drop();
        } else {
            if (hdr.ipv4.isValid()) {
                last_ipv4_id.write(0, (bit<32>) hdr.ipv4.identification);
            }
            if (hdr.probe.isValid()) {
                bit<32> seq;
                rx_seq.read(seq, (bit<32>) smeta.ingress_port);
                seq = seq + 1;
                rx_seq.write((bit<32>) smeta.ingress_port, seq);
                hdr.probe.seq = seq;
                last_ipv4_id.read(hdr.probe.stamp, 0);
            }
            fwd.apply();
        }
    }
}

control SwEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t smeta) {
    counter(512, CounterType.packets) port_tx;
    apply {
        port_tx.count((bit<32>) smeta.egress_port);
    }
}

control SwComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control SwDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.probe);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(SwParser(), SwVerifyChecksum(), SwIngress(), SwEgress(), SwComputeChecksum(),
         SwDeparser()) main;

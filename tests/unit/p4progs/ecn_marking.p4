/* ECN marking at egress when the queue depth at enqueue exceeds a threshold. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

const bit<19> ECN_THRESHOLD = 10;
const bit<2> ECN_CE = 3;

struct metadata { }

struct headers {
    ethernet_t ethernet;
    ipv4_t     ipv4;
}

parser EcnParser(packet_in pkt, out headers hdr, inout metadata meta,
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
        transition accept;
    }
}

control EcnVerify(inout headers hdr, inout metadata meta) { apply { } }

control EcnIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) {
        sm.egress_spec = port;
    }
    table port_fwd {
        key = { sm.ingress_port: exact; }
        actions = { forward; NoAction; }
        default_action = NoAction();
        size = 64;
    }
    apply {
        port_fwd.apply();
    }
}

control EcnEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action mark_ecn() {
        hdr.ipv4.ecn = ECN_CE;
    }
    apply {
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            if (sm.enq_qdepth >= ECN_THRESHOLD) {
                mark_ecn();
            }
        }
    }
}

control EcnCompute(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control EcnDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv4);
    }
}

V1Switch(EcnParser(), EcnVerify(), EcnIngress(), EcnEgress(), EcnCompute(), EcnDeparser()) main;

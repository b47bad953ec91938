/* Control-plane test program: one of every P4Runtime object the client handles (LPM, ternary/
 * range/optional keys, action selector, direct and indirect counters, meter, register, digest,
 * packet_in/packet_out). A packet-out whose egress_port is the CPU port comes straight back as a
 * packet-in (and sends a digest), so packet I/O can be tested with no data-plane ports. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 510;

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header l4_t {
    bit<16> srcPort;
    bit<16> dstPort;
}

struct mac_learn_digest_t {
    bit<48> srcAddr;
    bit<9>  ingress_port;
}

struct metadata {
    bit<16> group_id;
    bit<2>  color;
    bit<32> occupancy;
}

struct headers {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    l4_t         l4;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) {
            6: parse_l4;
            17: parse_l4;
            default: accept;
        }
    }
    state parse_l4 {
        packet.extract(hdr.l4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets_and_bytes) port_pkts;
    direct_counter(CounterType.packets_and_bytes) lpm_hits;
    meter(64, MeterType.packets) rate_meter;
    action_selector(HashAlgorithm.crc16, 32w128, 32w14) ecmp_selector;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_nhop(bit<48> dmac, bit<9> port) {
        hdr.ethernet.dstAddr = dmac;
        standard_metadata.egress_spec = port;
    }
    action set_group(bit<16> group_id) {
        meta.group_id = group_id;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; set_group; drop; NoAction; }
        counters = lpm_hits;
        size = 1024;
        default_action = NoAction();
    }
    table acl {
        key = {
            hdr.ipv4.srcAddr: ternary;
            hdr.l4.dstPort: range;
            standard_metadata.ingress_port: optional;
            hdr.ipv4.protocol: exact;
        }
        actions = { drop; NoAction; }
        size = 256;
        default_action = NoAction();
    }
    table ecmp_group {
        key = {
            meta.group_id: exact;
            hdr.ipv4.srcAddr: selector;
            hdr.ipv4.dstAddr: selector;
        }
        actions = { set_nhop; NoAction; }
        implementation = ecmp_selector;
        size = 64;
    }
    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            if (standard_metadata.egress_spec == CPU_PORT) {
                hdr.packet_in.setValid();
                hdr.packet_in.ingress_port = standard_metadata.ingress_port;
                hdr.packet_in._pad = 0;
                digest<mac_learn_digest_t>(1, {hdr.ethernet.srcAddr,
                                               standard_metadata.ingress_port});
            }
            return;
        }
        port_pkts.count((bit<32>)standard_metadata.ingress_port);
        rate_meter.execute_meter<bit<2>>((bit<32>)standard_metadata.ingress_port[5:0],
                                         meta.color);
        if (hdr.ipv4.isValid()) {
            acl.apply();
            ipv4_lpm.apply();
            if (meta.group_id != 0) {
                ecmp_group.apply();
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    register<bit<32>>(512) queue_occ;

    action set_smac(bit<48> smac) {
        hdr.ethernet.srcAddr = smac;
    }
    table rewrite_mac {
        key = { standard_metadata.egress_port: exact; }
        actions = { set_smac; NoAction; }
        size = 512;
        default_action = NoAction();
    }
    apply {
        queue_occ.write((bit<32>)standard_metadata.egress_port,
                        (bit<32>)standard_metadata.enq_qdepth);
        rewrite_mac.apply();
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.l4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;

// The program the P4Runtime server tests drive: every match kind, a direct counter and meter,
// an action selector, indirect counters/meters, a register, a digest and controller headers.
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
    bit<3> flags;
    bit<4> _pad;
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

struct mac_learn_t {
    bit<48> src_addr;
    bit<9>  ingress_port;
}

struct metadata {
    bit<8>  ecmp_group;
    bit<16> l4_port;
    bit<32> color;
}

struct headers {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
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
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) lpm_counter;
    direct_meter<bit<32>>(MeterType.packets) acl_meter;
    counter(8, CounterType.packets_and_bytes) port_counter;
    counter(4, CounterType.bytes) byte_counter;
    meter(4, MeterType.packets) port_meter;
    register<bit<32>>(8) reg;
    action_selector(HashAlgorithm.crc16, 64, 16) ecmp_selector;

    action set_nhop(bit<9> port, bit<48> dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dstAddr = dmac;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    action send_to_cpu() {
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
        standard_metadata.egress_spec = CPU_PORT;
    }
    action learn() {
        digest<mac_learn_t>(1, {hdr.ethernet.srcAddr, standard_metadata.ingress_port});
    }
    action set_nhop_metered(bit<9> port, bit<48> dmac) {
        acl_meter.read(meta.color);
        set_nhop(port, dmac);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nhop; drop; NoAction; send_to_cpu; }
        counters = lpm_counter;
        size = 1024;
        default_action = drop();
    }
    table acl {
        key = {
            hdr.ethernet.etherType: ternary;
            meta.l4_port: range;
            standard_metadata.ingress_port: optional;
        }
        actions = { drop; @tableonly set_nhop_metered; @defaultonly NoAction; learn; }
        meters = acl_meter;
        size = 256;
        default_action = NoAction();
    }
    table port_map {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ethernet.dstAddr: exact;
        }
        actions = { set_nhop; NoAction; }
        const default_action = NoAction();
        support_timeout = true;
        size = 64;
    }
    table ecmp {
        key = {
            meta.ecmp_group: exact;
            hdr.ipv4.srcAddr: selector;
            hdr.ipv4.dstAddr: selector;
        }
        actions = { set_nhop; drop; }
        implementation = ecmp_selector;
        size = 64;
    }

    apply {
        port_counter.count((bit<32>)standard_metadata.ingress_port & 7);
        port_meter.execute_meter((bit<32>)0, meta.color);
        reg.write(0, (bit<32>)standard_metadata.ingress_port);
        byte_counter.count(0);
        ipv4_lpm.apply();
        acl.apply();
        port_map.apply();
        ecmp.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;

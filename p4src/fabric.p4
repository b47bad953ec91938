/* cellfabric fabric.p4 -- one P4_16 v1model program for every switch of the fabric.
 * Its role (leaf, spine, tier of a fat-tree) and behaviour come from the tables the control
 * plane writes: routing to next-hop groups with per-cell spraying, INT-MD v2.1, ECN marking,
 * tenant isolation, feedback priority, counters. Tables, registers, counters and wire
 * constants are described in p4src/README.md. */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/congestion.p4"
#include "include/routing.p4"
#include "include/isolation.p4"
#include "include/telemetry.p4"
#include "include/deparser.p4"

/* Packets dropped, by DROP_* reason; shared by ingress and egress. */
counter(DROP_REASON_SLOTS, CounterType.packets) drop_counter;

control MyIngress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(PORT_SLOTS, CounterType.packets_and_bytes) port_rx;

    Forwarding() forwarding;
    HostPortGuard() guard;
    TenantIsolation() isolation;
    SprayGroups() spray;
    IntIngress() int_ingress;
    FeedbackPriority() feedback;
    ControlPriority() cpu_out;

    apply {
        port_rx.count((bit<32>)standard_metadata.ingress_port);
        if (hdr.packet_out.isValid()) {
            /* from the controller: out of the port it names, untouched */
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            cpu_out.apply(standard_metadata);
        } else if (standard_metadata.parser_error != error.NoError
                   || standard_metadata.checksum_error == 1) {
            meta.drop_reason = DROP_BAD_PACKET;
        } else {
            if (hdr.bth.isValid()) {
                /* RoCEv2 data: SEND/WRITE operations (0x00-0x0B) of RC, UC or UD */
                bit<3> transport = hdr.bth.opcode[7:5];
                if ((transport == 3w0 || transport == 3w1 || transport == 3w3)
                        && hdr.bth.opcode[4:0] <= 5w0x0B) {
                    meta.roce_data = 1;
                }
                bit<16> int_bytes = 0;
                if (hdr.int_shim.isValid()) {
                    int_bytes = ((bit<16>)hdr.int_shim.len + 1) << 2;
                }
                /* UDP header (8) + BTH (12) + ICRC (4) */
                meta.cell_payload_len = hdr.udp.length - 24 - int_bytes;
            }
            /* a host port's frame is checked against the port before anything acts on it */
            guard.apply(hdr, meta, standard_metadata);
            if (meta.drop_reason == DROP_NONE) {
                forwarding.apply(hdr, meta, standard_metadata);
            }
            if (meta.routed == 1) {
                isolation.apply(hdr, meta, standard_metadata);
            }
            if (meta.routed == 1 && meta.drop_reason == DROP_NONE) {
                spray.apply(hdr, meta, standard_metadata);
            }
            if (meta.drop_reason == DROP_NONE && meta.punted == 0 && hdr.ipv4.isValid()) {
                int_ingress.apply(hdr, meta, standard_metadata);
            }
            feedback.apply(hdr, meta, standard_metadata);
        }
        if (meta.drop_reason != DROP_NONE) {
            mark_to_drop(standard_metadata);
            drop_counter.count((bit<32>)meta.drop_reason);
        }
    }
}

control MyEgress(inout headers_t hdr,
                 inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    counter(PORT_SLOTS, CounterType.packets_and_bytes) port_tx;
    /* the RoCEv2 data packets (cells) among port_tx: the rest is feedback and other traffic */
    counter(PORT_SLOTS, CounterType.packets_and_bytes) port_tx_data;
    /* what the switch's own control plane sent (PacketOuts: a NOS's BGP, BFD and ARP in band)
     * among port_tx: an emulated fabric serves them off the line rate (CONTROL_PRIORITY) */
    counter(PORT_SLOTS, CounterType.packets_and_bytes) port_tx_control;

    EgressRewrite() rewrite;
    EcnMarking() ecn;
    IntEgress() int_egress;
    TelemetryReport() report;

    apply {
        if (standard_metadata.instance_type == INSTANCE_INGRESS_CLONE) {
            report.apply(hdr, meta, standard_metadata);
        } else if (standard_metadata.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
        } else if (standard_metadata.instance_type == INSTANCE_REPLICATION
                   && standard_metadata.egress_port == standard_metadata.ingress_port) {
            meta.drop_reason = DROP_SAME_PORT;
        } else {
            /* only data (priority 0) departures: a feedback packet leaving its own, mostly
             * empty queue would reset a busy port's depth to 0 and draw adaptive cells to it */
            if (standard_metadata.priority == 0) {
                port_qdepth.write((bit<32>)standard_metadata.egress_port,
                                  (bit<32>)standard_metadata.deq_qdepth);
            }
            rewrite.apply(hdr, meta, standard_metadata);
            ecn.apply(hdr, meta, standard_metadata);
            int_egress.apply(hdr, meta, standard_metadata);
        }
        if (meta.drop_reason != DROP_NONE) {
            mark_to_drop(standard_metadata);
            drop_counter.count((bit<32>)meta.drop_reason);
        } else {
            port_tx.count((bit<32>)standard_metadata.egress_port);
            if (meta.roce_data == 1) {
                port_tx_data.count((bit<32>)standard_metadata.egress_port);
            } else if (standard_metadata.ingress_port == CPU_PORT) {
                port_tx_control.count((bit<32>)standard_metadata.egress_port);
            }
        }
    }
}

V1Switch(MyParser(),
         MyVerifyChecksum(),
         MyIngress(),
         MyEgress(),
         MyComputeChecksum(),
         MyDeparser()) main;

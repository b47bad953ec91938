/* cellfabric fabric.p4 -- congestion: per-port queue state, ECN marking, feedback priority. */
#ifndef _FABRIC_CONGESTION_P4_
#define _FABRIC_CONGESTION_P4_

#include "headers.p4"

/* Depth (packets) of each egress queue as last seen by egress (deq_qdepth of the latest
 * packet out of that port). Written by egress, read by ingress for `adaptive` groups; the
 * control plane may also write it (tests fake congestion this way). Global so that both
 * pipelines can reach it. */
register<bit<32>>(PORT_SLOTS) port_qdepth;

/* Bytes sent out of each port, modulo 2^32 (INT "egress tx utilization", HPCC's txBytes). */
register<bit<32>>(PORT_SLOTS) port_tx_bytes;

/* Ingress: CNPs and ACKs go to a higher-priority queue. The control plane maps BTH opcodes to
 * a priority (simple_switch --priority-queues N: 0..N-1, higher is served first), so a switch
 * started without priority queues simply gets no entries. */
control FeedbackPriority(inout headers_t hdr,
                         inout metadata_t meta,
                         inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) feedback_priority_counter;

    action set_priority(bit<3> prio) {
        standard_metadata.priority = prio;
    }

    table feedback_priority {
        key = { hdr.bth.opcode : exact; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
        counters = feedback_priority_counter;
        size = 64;
    }

    apply {
        if (hdr.bth.isValid()) {
            feedback_priority.apply();
        }
    }
}

/* Ingress: what the switch's own control plane sends (PacketOut: a NOS's BGP, BFD and ARP
 * in band) joins a queue above data, as a switch's CPU-generated traffic does: cells queued
 * on a congested port would otherwise hold BFD back past its detection time, and the
 * sessions, and with them the routes, would flap under the workload. One entry, for the CPU
 * port, naming the priority the control plane chose (the harness: 2, a queue of its own);
 * none on a switch started without priority queues. */
control ControlPriority(inout standard_metadata_t standard_metadata) {
    action set_priority(bit<3> prio) {
        standard_metadata.priority = prio;
    }

    table control_priority {
        key = { standard_metadata.ingress_port : exact; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
        size = 4;
    }

    apply {
        control_priority.apply();
    }
}

/* Egress: DCQCN/RED-like ECN marking on the depth of the queue the packet joined
 * (enq_qdepth, packets). With q = enq_qdepth and the port's profile (kmin, kmax, step):
 *   q <  kmin          never marked
 *   kmin <= q < kmax   marked with probability min(1, (q - kmin + 1) * step / 65536)
 *   q >= kmax          always marked
 * The control plane derives step = Pmax * 65536 / (Kmax - Kmin), so the probability rises
 * linearly and reaches Pmax on the last depth below Kmax. Only ECT(0)/ECT(1) packets are
 * marked; Not-ECT and CE are left alone. */
control EcnMarking(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    counter(PORT_SLOTS, CounterType.packets) ecn_marks;

    action set_ecn_profile(bit<19> kmin, bit<19> kmax, bit<32> step) {
        meta.ecn_kmin = kmin;
        meta.ecn_kmax = kmax;
        meta.ecn_step = step;
    }

    table ecn_profile {
        key = { standard_metadata.egress_port : exact; }
        actions = { set_ecn_profile; NoAction; }
        default_action = NoAction();
        size = PORT_SLOTS;
    }

    apply {
        if (hdr.ipv4.isValid() && hdr.ipv4.ecn != ECN_NOT_ECT && hdr.ipv4.ecn != ECN_CE) {
            if (ecn_profile.apply().hit) {
                bit<1> mark = 0;
                if (standard_metadata.enq_qdepth >= meta.ecn_kmax) {
                    mark = 1;
                } else if (standard_metadata.enq_qdepth >= meta.ecn_kmin) {
                    bit<32> draw;
                    random(draw, 32w0, 32w65535);
                    bit<32> above = (bit<32>)(standard_metadata.enq_qdepth - meta.ecn_kmin);
                    if (draw < (above + 1) * meta.ecn_step) {
                        mark = 1;
                    }
                }
                if (mark == 1) {
                    hdr.ipv4.ecn = ECN_CE;
                    ecn_marks.count((bit<32>)standard_metadata.egress_port);
                }
            }
        }
    }
}

#endif

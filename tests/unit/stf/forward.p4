// A small v1model program for the STF runner's own tests: a ternary table with priorities,
// an lpm table, multicast and a one-byte header (so frames shorter than Ethernet are legal).
#include <core.p4>
#include <v1model.p4>

header tag_t { bit<8> kind; }
header body_t { bit<16> key; bit<8> val; }
struct headers_t { tag_t tag; body_t body; }
struct meta_t {}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.tag);
        transition select(h.tag.kind) { 1: body; default: accept; }
    }
    state body { pkt.extract(h.body); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply {} }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action to_port(bit<9> port, bit<8> val) { sm.egress_spec = port; h.body.val = val; }
    action flood(bit<16> grp) { sm.mcast_grp = grp; }
    action drop() { mark_to_drop(sm); }
    table classify {
        key = { h.body.key: ternary; }
        actions = { to_port; flood; drop; }
        default_action = drop();
    }
    table route {
        key = { h.body.key: lpm; }
        actions = { to_port; drop; }
        default_action = drop();
    }
    apply {
        if (!h.body.isValid()) {
            sm.egress_spec = 2;  // runts and other kinds: port 2, unchanged
        } else if (!classify.apply().hit) {
            route.apply();
        }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply { if (sm.egress_rid != 0) { h.body.val = (bit<8>)sm.egress_rid; } }
}
control CC(inout headers_t h, inout meta_t m) { apply {} }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.tag); pkt.emit(h.body); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;

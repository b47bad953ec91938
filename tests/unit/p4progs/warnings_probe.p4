#include <core.p4>
#include <v1model.p4>
const bit<8> UNUSED_C = 1;
const bit<8> USED_C = 2;
typedef bit<9> unusedT;
typedef bit<32> usedT;
header h_t { bit<8> a; usedT b; }
header unused_h { bit<8> z; }
struct unused_s { bit<8> q; }
enum E { X, Y }
struct metadata { bit<8> m; }
struct headers { h_t h; h_t g; }
action global_unused() { }
parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control VC(inout headers hdr, inout metadata meta) { apply { } }
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(8, CounterType.packets) unused_ctr;
    counter(8, CounterType.packets) used_ctr;
    action a_unused() { meta.m = 1; }
    action a_used(bit<8> v) { meta.m = v; }
    action kill() {
        hdr.h.setInvalid();
        meta.m = hdr.h.a;
        used_ctr.count((bit<32>) hdr.h.b);
    }
    table t_unused { key = { hdr.h.a: exact; } actions = { a_used; } }
    table t { key = { hdr.h.a: exact; } actions = { a_used; kill; } }
    apply {
        bit<8> unused_local = 3;
        bit<8> tr = 300;
        bit<4> tr2 = (bit<4>) 8w255;
        meta.m = USED_C + tr + (bit<8>) tr2;
        t.apply();
        hdr.g.setInvalid();
        if (hdr.g.a == 1) { meta.m = 2; }
        hdr.g.setValid();
        meta.m = hdr.g.a;
    }
}
control E2(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E2(), C(), D()) main;

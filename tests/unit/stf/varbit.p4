// Variable-length extract for the STF runner's tests: the length (bits) is the first byte; the
// parser error is written into the second byte so the expected frames show it.
#include <core.p4>
#include <v1model.p4>

header len_t { bit<8> bits; bit<8> err; }
header opt_t { varbit<64> data; }
struct headers_t { len_t len; opt_t opt; }
struct meta_t {}

parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.len);
        pkt.extract(h.opt, (bit<32>)h.len.bits);
        transition accept;
    }
}
control VC(inout headers_t h, inout meta_t m) { apply {} }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (sm.parser_error == error.NoError) { h.len.err = 0; }
        else if (sm.parser_error == error.PacketTooShort) { h.len.err = 1; }
        else if (sm.parser_error == error.HeaderTooShort) { h.len.err = 4; }
        else if (sm.parser_error == error.ParserInvalidArgument) { h.len.err = 6; }
        else { h.len.err = 0xff; }
    }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply {} }
control CC(inout headers_t h, inout meta_t m) { apply {} }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.len); pkt.emit(h.opt); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;

/* A grab-bag of P4_16 constructs: serializable enums, value switch, functions, `return` in
 * actions and sub-controls, lookahead, parser masks/ranges/value_set, dynamic stack index,
 * slices/concat/shifts, signed and saturating arithmetic, @name/@id, log_msg/assert,
 * resubmit/recirculate/truncate/random. */
#include <core.p4>
#include <v1model.p4>
#include "common_headers.p4"

enum bit<8> Kind {
    DATA = 1,
    PROBE = 2,
    ACK = 0x81
}

header tag_t {
    bit<8>  kind;
    bit<8>  idx;
    int<16> delta;
    bit<16> value;
}

header word_t {
    bit<32> w;
}

struct pair_t {
    bit<16> lo;
    bit<16> hi;
}

struct metadata {
    bit<8>  kind_class;
    bit<16> sum;
    bool    is_probe;
    pair_t  pair;
    bit<32> rnd;
    int<16> sdelta;
    bit<8>  small_port_seen;
}

struct headers {
    ethernet_t ethernet;
    tag_t      tag;
    word_t[4]  words;
}

bit<16> swap_bytes(in bit<16> v) {
    return v[7:0] ++ v[15:8];
}

parser FParser(packet_in pkt, out headers hdr, inout metadata meta,
               inout standard_metadata_t sm) {
    value_set<bit<16>>(4) special_types;

    state start {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            0x88b5: check_tag;
            0x8800 &&& 0xff00: check_tag;
            special_types: check_tag;
            default: accept;
        }
    }
    state check_tag {
        transition select(pkt.lookahead<bit<8>>()) {
            0x00: reject;
            0x01 .. 0x7f: parse_tag;
            default: parse_tag;
        }
    }
    state parse_tag {
        pkt.extract(hdr.tag);
        transition select(sm.ingress_port) {
            0 .. 3: small_port;
            default: words;
        }
    }
    state small_port {
        meta.small_port_seen = 1;
        if (hdr.tag.idx == 3) {
            meta.small_port_seen = 3;
        } else {
            meta.small_port_seen = 2;
        }
        transition words;
    }
    state words {
        pkt.extract(hdr.words[0]);
        pkt.extract(hdr.words[1]);
        transition accept;
    }
}

control FVerify(inout headers hdr, inout metadata meta) { apply { } }

control Classify(inout headers hdr, inout metadata meta) {
    action early(bit<8> c) {
        meta.kind_class = c;
        if (c == 0) {
            return;
        }
        meta.kind_class = c + 1;
    }
    @name("kinds") table kind_table {
        key = {
            hdr.tag.kind: exact @name("tag_kind");
            hdr.tag.value ^ 16w0xff: ternary @name("tag_value_x");
        }
        actions = { early; }
        default_action = early(0);
    }
    apply {
        if (!hdr.tag.isValid()) {
            return;
        }
        kind_table.apply();
    }
}

control FIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    Classify() classify;
    bit<16> scratch = 16w7;

    @id(0x42)
    action to_port(bit<9> port) { sm.egress_spec = port; }

    @name(".global_fwd")
    table fwd {
        key = { sm.ingress_port: exact; }
        actions = { to_port; }
        default_action = to_port(1);
    }

    apply {
        classify.apply(hdr, meta);
        fwd.apply();
        if (hdr.tag.isValid()) {
            switch ((Kind)hdr.tag.kind) {
                Kind.DATA: { meta.sum = hdr.tag.value + scratch; }
                Kind.PROBE:
                Kind.ACK: { meta.is_probe = true; }
                default: { meta.sum = swap_bytes(hdr.tag.value); }
            }
            meta.sdelta = hdr.tag.delta - 16s100;
            meta.pair = { hdr.tag.value, hdr.tag.value |-| 16w1000 };
            hdr.words[hdr.tag.idx[1:0]].w = (bit<32>)hdr.tag.value << 3;
            random(meta.rnd, 32w0, 32w9);
            log_msg("tag kind {} value {}", { hdr.tag.kind, hdr.tag.value });
            assert(hdr.tag.isValid());
        }
        if (meta.is_probe) {
            truncate(64);
        }
    }
}

control FEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.words[0].minSizeInBits() == 32 && sm.egress_port == 7) {
            recirculate_preserving_field_list(0);
        }
    }
}

control FCompute(inout headers hdr, inout metadata meta) { apply { } }

control FDeparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.tag);
        pkt.emit(hdr.words);
    }
}

V1Switch(FParser(), FVerify(), FIngress(), FEgress(), FCompute(), FDeparser()) main;

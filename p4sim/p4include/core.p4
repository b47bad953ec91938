/* core.p4 for p4sim: the P4_16 core library declarations (written for cellfabric from the
 * P4_16 language specification; names and signatures follow the standard library). */
#ifndef _CORE_P4_
#define _CORE_P4_

/* Errors raised by the core library. */
error {
    NoError,
    PacketTooShort,
    NoMatch,
    StackOutOfBounds,
    HeaderTooShort,
    ParserTimeout,
    ParserInvalidArgument
}

/* The packet being parsed. */
extern packet_in {
    /* Read a fixed-size header and advance the cursor. */
    void extract<T>(out T hdr);
    /* Read a header with one varbit field of the given size. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* Read bits without advancing the cursor. */
    T lookahead<T>();
    /* Skip bits. */
    void advance(in bit<32> sizeInBits);
    /* Length of the whole packet in bytes. */
    bit<32> length();
}

/* The packet being built by a deparser. */
extern packet_out {
    /* Append a header (skipped when invalid) or each member of a struct/stack. */
    void emit<T>(in T hdr);
}

/* Ends parsing with the given error when the check fails. */
extern void verify(in bool check, in error toSignal);

/* Checked while compiling: a false condition stops compilation with the message. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

/* The action that does nothing. */
@noWarn("unused")
action NoAction() {}

/* Match kinds every target supports. */
match_kind {
    exact,
    ternary,
    lpm
}

#endif  /* _CORE_P4_ */

"""Recursive-descent parser for P4_16 declarations (types, externs, parsers, controls,
tables, actions, functions, instantiations). Expressions and statements: parse_expr.py."""

from __future__ import annotations

from p4sim.frontend import ast as A
from p4sim.frontend.errors import CompileError
from p4sim.frontend.lexer import Token
from p4sim.frontend.parse_stmt import StmtParser


class Parser(StmtParser):
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.pos = 0
        self.type_names: list[set[str]] = [set()]

    def declare_type(self, name: str) -> None:
        self.type_names[-1].add(name)

    def push_type_params(self, params: list[str]) -> None:
        self.type_names.append(set(params))

    def pop_type_params(self) -> None:
        self.type_names.pop()

    # ---- program ------------------------------------------------------------------------------
    def parse_program(self) -> A.Program:
        decls: list[A.Node] = []
        loc = self.tok.loc
        while self.tok.kind != "eof":
            if self.accept(";"):
                continue
            decls.append(self.parse_decl())
        return A.Program(loc, decls)

    def parse_decl(self) -> A.Node:
        annos = self.parse_annotations()
        t = self.tok
        kw = t.text if t.kind == "kw" else None
        if kw in ("header", "struct", "header_union"):
            return self.parse_header(annos, kw)
        if kw == "enum":
            return self.parse_enum(annos)
        if kw == "error":
            self.pos += 1
            return A.ErrorDecl(t.loc, annos, "error", self.parse_id_list())
        if kw == "match_kind":
            self.pos += 1
            return A.MatchKindDecl(t.loc, annos, "match_kind", self.parse_id_list())
        if kw in ("typedef", "type"):
            self.pos += 1
            ty = self.parse_type()
            name = self.ident()
            self.expect(";")
            self.declare_type(name.text)
            return A.TypedefDecl(name.loc, annos, name.text, ty, kw == "type")
        if kw == "const":
            self.pos += 1
            return self.parse_var_decl(annos, const=True)
        if kw == "extern":
            return self.parse_extern(annos)
        if kw == "action":
            return self.parse_action(annos)
        if kw == "parser":
            return self.parse_parser(annos)
        if kw == "control":
            return self.parse_control(annos)
        if kw == "package":
            return self.parse_package(annos)
        if t.kind == "id" and t.text == "value_set":
            return self.parse_value_set(annos)
        if self.starts_type() and (self.peek().kind == "id" or self.peek().text == "<"):
            return self.parse_function_or_instance(annos)
        if t.kind == "id" and self.peek().text == "(" and self.is_type_name(t.text):
            return self.parse_instance(annos)
        raise self.syntax("expected a declaration")

    def parse_id_list(self) -> list[tuple[str, object]]:
        self.expect("{")
        out: list[tuple[str, object]] = []
        while not self.at("}"):
            n = self.ident()
            out.append((n.text, n.loc))
            if not self.accept(","):
                break
        self.expect("}")
        return out

    def parse_header(self, annos: list[A.Annotation], kind: str) -> A.HeaderDecl:
        self.pos += 1
        name = self.ident()
        self.declare_type(name.text)
        self.expect("{")
        fields: list[A.FieldDecl] = []
        while not self.at("}"):
            fannos = self.parse_annotations()
            ty = self.parse_type()
            fname = self.ident()
            self.expect(";")
            fields.append(A.FieldDecl(fname.loc, fannos, fname.text, ty))
        self.expect("}")
        return A.HeaderDecl(name.loc, annos, name.text, kind, fields)

    def parse_enum(self, annos: list[A.Annotation]) -> A.EnumDecl:
        self.expect("enum")
        underlying = None
        if self.at("bit") or self.at("int"):
            underlying = self.parse_type()
        name = self.ident()
        self.declare_type(name.text)
        self.expect("{")
        members: list[tuple[str, A.Expr | None, object]] = []
        while not self.at("}"):
            m = self.ident()
            value = self.parse_expr() if self.accept("=") else None
            members.append((m.text, value, m.loc))
            if not self.accept(","):
                break
        self.expect("}")
        return A.EnumDecl(name.loc, annos, name.text, underlying, members)  # type: ignore[arg-type]

    def parse_type_params(self) -> list[str]:
        if not self.accept("<"):
            return []
        names = [self.ident().text]
        while self.accept(","):
            names.append(self.ident().text)
        self.close_angle()
        return names

    def parse_params(self) -> list[A.Param]:
        self.expect("(")
        params: list[A.Param] = []
        while not self.at(")"):
            pannos = self.parse_annotations()
            direction = ""
            if self.tok.kind == "kw" and self.tok.text in ("in", "out", "inout"):
                direction = self.tok.text
                self.pos += 1
            ty = self.parse_type()
            name = self.ident()
            default = self.parse_expr() if self.accept("=") else None
            params.append(A.Param(name.loc, pannos, name.text, direction, ty, default))
            if not self.accept(","):
                break
        self.expect(")")
        return params

    def parse_extern(self, annos: list[A.Annotation]) -> A.Node:
        self.expect("extern")
        # extern function: `extern RET NAME<...>(...)`; extern object: `extern NAME<...> {`
        if self.tok.kind == "id" and self.peek().text in ("{", "<") and not (
                self.peek().text == "<" and self.is_type_name(self.tok.text)
                and self.peek(2).kind != "id") and (
                self.peek().text == "{" or not self._generic_func_ahead()):
            return self.parse_extern_object(annos)
        ret, name, tparams, params = self.parse_signature()
        return A.FunctionDecl(name.loc, annos, name.text, ret, tparams, params, None)

    def parse_signature(self) -> tuple[A.TypeSyntax, Token, list[str], list[A.Param]]:
        """`RET NAME<T...>(params);` of an extern function or an extern's method."""
        ret = self.parse_type()
        name = self.ident()
        tparams = self.parse_type_params()
        self.push_type_params(tparams)
        params = self.parse_params()
        self.pop_type_params()
        self.expect(";")
        return ret, name, tparams, params

    def _generic_func_ahead(self) -> bool:
        # `extern T name<...>(...)` vs `extern name<T> {`: an object when `>` is followed by `{`.
        i, depth = self.pos + 1, 0
        while i < len(self.toks):
            t = self.toks[i]
            if t.text == "<":
                depth += 1
            elif t.text == ">":
                depth -= 1
                if depth == 0:
                    return self.toks[i + 1].text != "{"
            elif t.text in ("{", ";", "("):
                return False
            i += 1
        return False

    def parse_extern_object(self, annos: list[A.Annotation]) -> A.ExternDecl:
        name = self.ident()
        self.declare_type(name.text)
        tparams = self.parse_type_params()
        self.push_type_params(tparams)
        self.expect("{")
        methods: list[A.MethodDecl] = []
        while not self.at("}"):
            mannos = self.parse_annotations()
            abstract = bool(self.accept("abstract"))
            if self.tok.kind == "id" and self.tok.text == name.text and self.peek().text == "(":
                ctor = self.ident()
                params = self.parse_params()
                self.expect(";")
                methods.append(A.MethodDecl(ctor.loc, mannos, ctor.text, None, [], params))
                continue
            ret, mname, mtparams, params = self.parse_signature()
            methods.append(A.MethodDecl(mname.loc, mannos, mname.text, ret, mtparams, params,
                                        abstract))
        self.expect("}")
        self.pop_type_params()
        return A.ExternDecl(name.loc, annos, name.text, tparams, methods)

    def parse_action(self, annos: list[A.Annotation]) -> A.ActionDecl:
        self.expect("action")
        name = self.ident()
        params = self.parse_params()
        body = self.parse_block()
        return A.ActionDecl(name.loc, annos, name.text, params, body)

    def parse_function_or_instance(self, annos: list[A.Annotation]) -> A.Node:
        save = self.pos
        ty = self.parse_type()
        if self.at("("):  # instantiation: Type<...>(args) name;
            self.pos = save
            return self.parse_instance(annos)
        name = self.ident()
        tparams = self.parse_type_params()
        self.push_type_params(tparams)
        params = self.parse_params()
        body = self.parse_block()
        self.pop_type_params()
        return A.FunctionDecl(name.loc, annos, name.text, ty, tparams, params, body)

    def parse_instance(self, annos: list[A.Annotation]) -> A.Instance:
        ty = self.parse_type()
        args = self.parse_args()
        name = self.ident()
        self.expect(";")
        return A.Instance(name.loc, annos, name.text, ty, args)

    def parse_value_set(self, annos: list[A.Annotation]) -> A.ValueSetDecl:
        self.ident()
        self.expect("<")
        elem = self.parse_type()
        self.close_angle()
        self.expect("(")
        size = self.parse_expr()
        self.expect(")")
        name = self.ident()
        self.expect(";")
        return A.ValueSetDecl(name.loc, annos, name.text, elem, size)

    def parse_type_head(self, keyword: str) -> tuple[Token, list[str], list[A.Param]]:
        """`KEYWORD Name<T...>(params)` of a package, parser or control: its name, type
        parameters (left in scope for the caller to pop) and parameters."""
        self.expect(keyword)
        name = self.ident()
        self.declare_type(name.text)
        tparams = self.parse_type_params()
        self.push_type_params(tparams)
        return name, tparams, self.parse_params()

    def parse_package(self, annos: list[A.Annotation]) -> A.PackageDecl:
        name, tparams, params = self.parse_type_head("package")
        self.pop_type_params()
        self.expect(";")
        return A.PackageDecl(name.loc, annos, name.text, tparams, params)

    # ---- parsers ------------------------------------------------------------------------------
    def parse_parser(self, annos: list[A.Annotation]) -> A.ParserDecl:
        name, tparams, params = self.parse_type_head("parser")
        if self.accept(";"):
            self.pop_type_params()
            return A.ParserDecl(name.loc, annos, name.text, tparams, params, [], [], [], True)
        ctor = self.parse_params() if self.at("(") else []
        self.expect("{")
        local: list[A.Node] = []
        states: list[A.ParserState] = []
        while not self.at("}"):
            lannos = self.parse_annotations()
            if self.at("state"):
                states.append(self.parse_state(lannos))
            else:
                local.append(self.parse_local(lannos))
        self.expect("}")
        self.pop_type_params()
        return A.ParserDecl(name.loc, annos, name.text, tparams, params, ctor, local, states)

    def parse_key_element(self) -> A.KeyElement:
        e = self.parse_expr()
        self.expect(":")
        mk = self.ident()
        kannos = self.parse_annotations()
        self.expect(";")
        return A.KeyElement(e.loc, e, mk.text, mk.loc, kannos)

    def parse_local(self, annos: list[A.Annotation]) -> A.Node:
        t = self.tok
        if t.kind == "kw" and t.text == "const":
            self.pos += 1
            return self.parse_var_decl(annos, const=True)
        if t.kind == "kw" and t.text == "action":
            return self.parse_action(annos)
        if t.kind == "id" and t.text == "table":
            return self.parse_table(annos)
        if t.kind == "kw" and t.text == "table":
            return self.parse_table(annos)
        if t.kind == "id" and t.text == "value_set":
            return self.parse_value_set(annos)
        save = self.pos
        if self.starts_type():
            self.parse_type()
            is_inst = self.at("(")
            self.pos = save
            if is_inst:
                return self.parse_instance(annos)
            return self.parse_var_decl(annos)
        raise self.syntax("expected a declaration")

    def parse_state(self, annos: list[A.Annotation]) -> A.ParserState:
        self.expect("state")
        name = self.ident()
        self.expect("{")
        stmts: list[A.Stmt] = []
        transition = None
        while not self.at("}"):
            if self.at("transition"):
                transition = self.parse_transition()
                break
            stmts.append(self.parse_stmt())
        self.expect("}")
        return A.ParserState(name.loc, annos, name.text, stmts, transition)

    def parse_transition(self) -> A.Transition:
        t = self.expect("transition")
        if self.at("select"):
            self.pos += 1
            self.expect("(")
            exprs = [self.parse_expr()]
            while self.accept(","):
                exprs.append(self.parse_expr())
            self.expect(")")
            self.expect("{")
            cases: list[A.SelectCase] = []
            while not self.at("}"):
                if self.at("("):
                    lp = self.expect("(")
                    items = [self.parse_keyset()]
                    while self.accept(","):
                        items.append(self.parse_keyset())
                    self.expect(")")
                    keyset: A.Expr = A.ListExpr(lp.loc, items)
                else:
                    keyset = self.parse_keyset()
                self.expect(":")
                st = self.ident()
                self.expect(";")
                cases.append(A.SelectCase(keyset.loc, keyset, st.text, st.loc))
            self.expect("}")
            return A.Transition(t.loc, None, exprs, cases)
        st = self.ident()
        self.expect(";")
        return A.Transition(st.loc, st.text)

    # ---- controls -----------------------------------------------------------------------------
    def parse_control(self, annos: list[A.Annotation]) -> A.ControlDecl:
        name, tparams, params = self.parse_type_head("control")
        if self.accept(";"):
            self.pop_type_params()
            return A.ControlDecl(name.loc, annos, name.text, tparams, params, [], [], None, True)
        ctor = self.parse_params() if self.at("(") else []
        self.expect("{")
        local: list[A.Node] = []
        while not self.at("apply"):
            if self.tok.kind == "eof" or self.at("}"):
                raise CompileError(self.tok.loc, f"control {name.text} has no apply block")
            local.append(self.parse_local(self.parse_annotations()))
        self.expect("apply")
        body = self.parse_block()
        self.expect("}")
        self.pop_type_params()
        return A.ControlDecl(name.loc, annos, name.text, tparams, params, ctor, local, body)

    def parse_table(self, annos: list[A.Annotation]) -> A.TableDecl:
        self.pos += 1
        name = self.ident()
        self.expect("{")
        props: list[A.TableProperty] = []
        while not self.at("}"):
            pannos = self.parse_annotations()
            const = bool(self.accept("const"))
            pt = self.tok
            pname = self.ident().text if pt.kind == "id" else self._kw_member().text
            if pname == "key":
                self.expect("=")
                keys = self.parse_braced(self.parse_key_element)
                props.append(A.TableProperty(pt.loc, "key", keys, const, pannos))
            elif pname == "actions":
                self.expect("=")
                self.expect("{")
                acts: list[tuple[list[A.Annotation], A.Expr]] = []
                while not self.at("}"):
                    aannos = self.parse_annotations()
                    acts.append((aannos, self.parse_expr()))
                    self.expect(";")
                self.expect("}")
                props.append(A.TableProperty(pt.loc, "actions", acts, const, pannos))
            elif pname == "entries":
                self.expect("=")
                props.append(A.TableProperty(pt.loc, "entries", self.parse_entries(), const,
                                             pannos))
            else:
                self.expect("=")
                value = self.parse_expr()
                self.expect(";")
                props.append(A.TableProperty(pt.loc, pname, value, const, pannos))
        self.expect("}")
        return A.TableDecl(name.loc, annos, name.text, props)

    def parse_entries(self) -> list[A.TableEntry]:
        self.expect("{")
        entries: list[A.TableEntry] = []
        while not self.at("}"):
            eannos = self.parse_annotations()
            t = self.tok
            prio = None
            if t.kind == "id" and t.text == "priority" and self.peek().text == "=":
                self.pos += 2
                prio = self.parse_expr()
                self.expect(":")
            if self.at("("):
                self.pos += 1
                keys = [self.parse_keyset()]
                while self.accept(","):
                    keys.append(self.parse_keyset())
                self.expect(")")
            else:
                keys = [self.parse_keyset()]
            self.expect(":")
            action = self.parse_expr()
            eannos += self.parse_annotations()  # `: a() @priority(3);`
            self.expect(";")
            entries.append(A.TableEntry(t.loc, keys, action, prio, eannos))
        self.expect("}")
        return entries


def parse(toks: list[Token]) -> A.Program:
    return Parser(toks).parse_program()

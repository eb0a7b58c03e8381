"""Sums in vector lanes, their order written out: the kernels' dot products where a compiled loop would leave the
order of its partial sums, or its speed, to the compiler.

A vectorising compiler splits a long sum into lanes (the terms ``j = l mod width`` in lane ``l``) and adds the lanes at
the end in an order of its choosing; it also decides which sums share a loop. The intrinsics below are written in
numba's IR builder (llvmlite) with their lanes explicit, so the order of every addition is fixed by this file:

* :func:`add_lane_sums`: ``acc[c, l] += sum over j in [j0, j1), j = l mod 16, of r_j PVt[c, j]`` for every column
  ``c`` of ``PVt``, 16 float64 lanes per column as four vectors of four, all columns in one loop that reads each
  entry of ``r`` once; fused multiply-adds in float64, and in float32 the product rounded to float32 first, then
  added in float64. :func:`lanes_total` then adds the 16 lanes of each column. This is the order numba gives its
  own compiled loop (:func:`tokensel.models.kernels._row_scores_loop`) on an x86-64 processor with AVX-512
  (``benchmarks/bench_gradient.py`` prints whether it does on the machine it runs on), so ``E [p, V]`` has the bits
  it had before the order was written out; the chunks ``[j0, j1)`` let a block of rows share the chunk of
  ``[p, V]`` while it is in the level-1 cache.
* :func:`four_lane_sum`: ``sum_j x_j (W[c, j] - ref)`` over ``j < L`` in four lanes (``j`` mod 4; the terms past the
  last whole four added to lane 0), then ``(s0 + s1) + (s2 + s3)``: the attention pass's order
  (:func:`tokensel.models.kernels._attend`), one vector instead of four scalar chains; :func:`weigh_and_sum`, its
  weights and their sums in the same order, all in one loop; :func:`add_scaled_four`, a four-class row of partial
  sums updated as one vector.

:func:`prefetch_row` asks for a row of ``E`` ahead of its use: where a step's other passes have pushed ``E`` out of
the cache, ``E [p, V]`` then reads it from memory while computing, not after.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

#: lanes of each dot product of :func:`add_lane_sums`: four vectors of four float64 partial sums
LANES = 16


def _vector_at(builder, base, at, elt, width):
    """The ``width`` entries of type ``elt`` from ``base[at]`` as one vector (an unaligned load)."""
    vty = ir.VectorType(elt, width)
    ptr = builder.bitcast(builder.gep(base, [at], source_etype=elt), vty.as_pointer())
    return builder.load(ptr, align=4 if elt == ir.FloatType() else 8, typ=vty)


def _is_c_array(ty, dtypes) -> bool:
    return isinstance(ty, types.Array) and ty.layout == "C" and ty.dtype in dtypes


@intrinsic(prefer_literal=True)
def _lane_sums(typingctx, r, PVt, acc, c0, j0, j1, C):  # pragma: no cover - compiled
    """``acc[c0 + c, l] += ...`` for the ``C`` columns from ``c0`` (``C`` a literal from 1 to 5): see
    :func:`add_lane_sums`. ``r`` (d), ``PVt`` (columns x d) and ``acc`` (columns x 16, float64) C-contiguous,
    ``j1 - j0`` a multiple of 16."""
    floats = (types.float32, types.float64)
    if not (
        isinstance(C, types.IntegerLiteral)
        and 1 <= C.literal_value <= 5
        and _is_c_array(r, floats)
        and _is_c_array(PVt, (r.dtype,) if isinstance(r, types.Array) else ())
        and _is_c_array(acc, (types.float64,))
        and r.ndim == 1
        and PVt.ndim == 2
        and acc.ndim == 2
    ):
        return None
    ncol = C.literal_value
    sig = types.void(r, PVt, acc, c0, j0, j1, C)

    def codegen(context, builder, signature, args):
        rty, pty, aty, c0ty, j0ty, j1ty, _ = signature.args
        ra = context.make_array(rty)(context, builder, args[0])
        pa = context.make_array(pty)(context, builder, args[1])
        aa = context.make_array(aty)(context, builder, args[2])
        intp = context.get_value_type(types.intp)
        c0v, j0v, j1v = (
            context.cast(builder, v, t, types.intp) for v, t in zip(args[3:6], (c0ty, j0ty, j1ty), strict=True)
        )
        elt, dbl = context.get_data_type(rty.dtype), ir.DoubleType()
        v4 = ir.VectorType(dbl, 4)
        d = builder.extract_value(pa.shape, 1)
        const = lambda x: ir.Constant(intp, x)  # noqa: E731
        # the sums of the group's columns, four vectors each, held in stack slots that the compiler keeps in registers
        slots = []
        for c in range(ncol):
            base = builder.mul(builder.add(c0v, const(c)), const(LANES))
            row = []
            for q in range(4):
                slot = cgutils.alloca_once(builder, v4)
                builder.store(_vector_at(builder, aa.data, builder.add(base, const(4 * q)), dbl, 4), slot)
                row.append(slot)
            slots.append(row)
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v4, [v4, v4, v4]), "llvm.fma.v4f64")
        with cgutils.for_range(builder, builder.udiv(builder.sub(j1v, j0v), const(LANES))) as loop:
            j = builder.add(j0v, builder.mul(loop.index, const(LANES)))
            xs = [_vector_at(builder, ra.data, builder.add(j, const(4 * q)), elt, 4) for q in range(4)]
            for c in range(ncol):
                row_at = builder.add(builder.mul(builder.add(c0v, const(c)), d), j)
                for q in range(4):
                    pv = _vector_at(builder, pa.data, builder.add(row_at, const(4 * q)), elt, 4)
                    a = builder.load(slots[c][q], typ=v4)
                    if elt == dbl:
                        s = builder.call(fma, [xs[q], pv, a])
                    else:  # the product rounded in float32, then added in float64
                        s = builder.fadd(a, builder.fpext(builder.fmul(xs[q], pv), v4))
                    builder.store(s, slots[c][q])
        for c in range(ncol):
            base = builder.mul(builder.add(c0v, const(c)), const(LANES))
            for q in range(4):
                at = builder.gep(aa.data, [builder.add(base, const(4 * q))], source_etype=dbl)
                builder.store(builder.load(slots[c][q], typ=v4), builder.bitcast(at, v4.as_pointer()), align=8)
        return context.get_dummy_value()

    return sig, codegen


# both helpers below are inlined into their callers (a call per row and chunk, with numba's reference counting of its
# array arguments, cost as much as the sums); a caller compiled with fastmath would let the compiler reorder
# lanes_total's additions, so none of their callers is
@numba.njit(cache=True, inline="always")
def add_lane_sums(r, PVt, acc, j0, j1):  # pragma: no cover - compiled
    """``acc[c, l] += sum over j in [j0, j1) with j = l mod 16 of r_j PVt[c, j]``, in order of ``j``, for every column
    ``c`` (``acc`` columns x 16 float64; ``j0`` and ``j1 - j0`` multiples of 16), the columns five (four classes), two
    (the binary model) or one at a time: three compiled loops, not one per group size (each costs compile time in a
    fresh install)."""
    C = PVt.shape[0]
    c0 = 0
    while c0 < C:
        left = C - c0
        if left >= 5:
            _lane_sums(r, PVt, acc, c0, j0, j1, 5)
            c0 += 5
        elif left >= 2:
            _lane_sums(r, PVt, acc, c0, j0, j1, 2)
            c0 += 2
        else:
            _lane_sums(r, PVt, acc, c0, j0, j1, 1)
            c0 += 1


@numba.njit(cache=True, inline="always")
def lanes_total(acc, out, tree):  # pragma: no cover - compiled
    """``out[c]`` = the 16 lane sums of ``acc[c]`` added: the four vectors of four (lanes ``l``, ``l + 4``, ``l + 8``,
    ``l + 12``) as ``(v0 + v1) + (v2 + v3)`` (``tree``, float64) or ``((v0 + v1) + v2) + v3`` (float32), then the four
    lanes left as ``(l0 + l2) + (l1 + l3)``; rounded to ``out``'s dtype."""
    for c in range(acc.shape[0]):
        a = acc[c]
        if tree:
            v0 = (a[0] + a[4]) + (a[8] + a[12])
            v1 = (a[1] + a[5]) + (a[9] + a[13])
            v2 = (a[2] + a[6]) + (a[10] + a[14])
            v3 = (a[3] + a[7]) + (a[11] + a[15])
        else:
            v0 = ((a[0] + a[4]) + a[8]) + a[12]
            v1 = ((a[1] + a[5]) + a[9]) + a[13]
            v2 = ((a[2] + a[6]) + a[10]) + a[14]
            v3 = ((a[3] + a[7]) + a[11]) + a[15]
        out[c] = (v0 + v2) + (v1 + v3)


@intrinsic
def four_lane_sum(typingctx, x, W, c, ref, L):  # pragma: no cover - compiled
    """``sum_j x_j (W[c, j] - ref)`` over ``j < L`` (``x`` and ``W`` C-contiguous float64): four lanes (``j`` mod 4)
    as one vector, each term ``x_j (W[c, j] - ref)`` rounded in turn (no fused multiply-add), the terms past the last
    whole four added to lane 0 in order, then ``(s0 + s1) + (s2 + s3)``."""
    if not (_is_c_array(x, (types.float64,)) and _is_c_array(W, (types.float64,)) and x.ndim == 1 and W.ndim == 2):
        return None
    sig = types.float64(x, W, c, ref, L)

    def codegen(context, builder, signature, args):
        xty, wty, cty, _, lty = signature.args
        xa = context.make_array(xty)(context, builder, args[0])
        wa = context.make_array(wty)(context, builder, args[1])
        intp = context.get_value_type(types.intp)
        cv, refv, Lv = context.cast(builder, args[2], cty, types.intp), args[3], args[4]
        Lv = context.cast(builder, Lv, lty, types.intp)
        dbl, i32 = ir.DoubleType(), ir.IntType(32)
        v4 = ir.VectorType(dbl, 4)
        wrow = cgutils.get_item_pointer(context, builder, wty, wa, [cv, ir.Constant(intp, 0)], wraparound=False)
        refs = ir.Constant(v4, ir.Undefined)
        for q in range(4):
            refs = builder.insert_element(refs, refv, ir.Constant(i32, q))
        acc = cgutils.alloca_once_value(builder, ir.Constant(v4, [0.0] * 4))
        whole = builder.udiv(Lv, ir.Constant(intp, 4))
        with cgutils.for_range(builder, whole) as loop:
            at = builder.mul(loop.index, ir.Constant(intp, 4))
            xv, wv = _vector_at(builder, xa.data, at, dbl, 4), _vector_at(builder, wrow, at, dbl, 4)
            builder.store(builder.fadd(builder.load(acc, typ=v4), builder.fmul(xv, builder.fsub(wv, refs))), acc)
        a = builder.load(acc, typ=v4)
        s = [builder.extract_element(a, ir.Constant(i32, q)) for q in range(4)]
        s0 = cgutils.alloca_once_value(builder, s[0])
        start = builder.mul(whole, ir.Constant(intp, 4))
        with cgutils.for_range_slice(builder, start, Lv, ir.Constant(intp, 1), inc=True) as (jj, _):
            xv = builder.load(builder.gep(xa.data, [jj], source_etype=dbl), typ=dbl)
            wv = builder.load(builder.gep(wrow, [jj], source_etype=dbl), typ=dbl)
            builder.store(builder.fadd(builder.load(s0, typ=dbl), builder.fmul(xv, builder.fsub(wv, refv))), s0)
        return builder.fadd(builder.fadd(builder.load(s0, typ=dbl), s[1]), builder.fadd(s[2], s[3]))

    return sig, codegen


def _as_double_vector(builder, v, ty):
    """A vector of numba type ``ty`` (its elements) converted to float64 exactly as numba converts one number."""
    vd = ir.VectorType(ir.DoubleType(), v.type.count)
    if isinstance(ty, types.Float):
        return v if ty == types.float64 else builder.fpext(v, vd)
    return builder.sitofp(v, vd) if ty.signed else builder.uitofp(v, vd)


@intrinsic(prefer_literal=True)
def weigh_and_sum(typingctx, e, counts, lo, W, refs, L, C):  # pragma: no cover - compiled
    """``e[j] *= counts[lo + j]`` for ``j < L``, and ``(Z, S_1, ..., S_C)`` with ``Z = sum_j e_j`` and ``S_c = sum_j
    e_j (W[c, j] - refs[c - 1])`` of the weighted ``e``, each in :func:`four_lane_sum`'s four lanes and order: the
    attention pass's weights and sums (:func:`tokensel.models.kernels._attend`) in one loop of vectors that reads each
    weight once for all of them. ``C`` a literal (1 to 4); ``e``, ``W`` and ``refs`` C-contiguous float64; ``counts`` a
    C-contiguous array of integers or floats (converted to float64 as numba converts them)."""
    f64 = (types.float64,)
    if not (
        isinstance(C, types.IntegerLiteral)
        and 1 <= C.literal_value <= 4
        and _is_c_array(e, f64)
        and _is_c_array(W, f64)
        and _is_c_array(refs, f64)
        and _is_c_array(counts, (types.int32, types.int64, types.float32, types.float64))
        and e.ndim == 1
        and counts.ndim == 1
        and W.ndim == 2
        and refs.ndim == 1
    ):
        return None
    nval = C.literal_value
    sig = types.UniTuple(types.float64, 1 + nval)(e, counts, lo, W, refs, L, C)

    def codegen(context, builder, signature, args):
        ety, cty, loty, wty, rty, lty, _ = signature.args
        ea = context.make_array(ety)(context, builder, args[0])
        ca = context.make_array(cty)(context, builder, args[1])
        wa = context.make_array(wty)(context, builder, args[3])
        ra = context.make_array(rty)(context, builder, args[4])
        intp = context.get_value_type(types.intp)
        lov = context.cast(builder, args[2], loty, types.intp)
        Lv = context.cast(builder, args[5], lty, types.intp)
        dbl, i32 = ir.DoubleType(), ir.IntType(32)
        v4 = ir.VectorType(dbl, 4)
        celt = context.get_data_type(cty.dtype)
        const = lambda x: ir.Constant(intp, x)  # noqa: E731
        wrows = [
            cgutils.get_item_pointer(context, builder, wty, wa, [const(1 + c), const(0)], wraparound=False)
            for c in range(nval)
        ]
        ref = [builder.load(builder.gep(ra.data, [const(c)], source_etype=dbl), typ=dbl) for c in range(nval)]
        splats = []
        for c in range(nval):
            v = ir.Constant(v4, ir.Undefined)
            for q in range(4):
                v = builder.insert_element(v, ref[c], ir.Constant(i32, q))
            splats.append(v)
        cbase = builder.gep(ca.data, [lov], source_etype=celt)
        zero4 = ir.Constant(v4, [0.0] * 4)
        accs = [cgutils.alloca_once_value(builder, zero4) for _ in range(1 + nval)]  # Z, then each S_c
        whole = builder.udiv(Lv, const(4))
        with cgutils.for_range(builder, whole) as loop:
            at = builder.mul(loop.index, const(4))
            cv = _as_double_vector(builder, _vector_at(builder, cbase, at, celt, 4), cty.dtype)
            ev = builder.fmul(_vector_at(builder, ea.data, at, dbl, 4), cv)
            builder.store(ev, builder.bitcast(builder.gep(ea.data, [at], source_etype=dbl), v4.as_pointer()), align=8)
            builder.store(builder.fadd(builder.load(accs[0], typ=v4), ev), accs[0])
            for c in range(nval):
                wv = _vector_at(builder, wrows[c], at, dbl, 4)
                term = builder.fmul(ev, builder.fsub(wv, splats[c]))
                builder.store(builder.fadd(builder.load(accs[1 + c], typ=v4), term), accs[1 + c])
        lanes = []  # per sum its four lanes, lane 0 in a slot that the tail adds to
        for acc in accs:
            v = builder.load(acc, typ=v4)
            parts = [builder.extract_element(v, ir.Constant(i32, q)) for q in range(4)]
            lanes.append([cgutils.alloca_once_value(builder, parts[0]), *parts[1:]])
        with cgutils.for_range_slice(builder, builder.mul(whole, const(4)), Lv, const(1), inc=True) as (jj, _):
            eptr = builder.gep(ea.data, [jj], source_etype=dbl)
            cnt = builder.load(builder.gep(cbase, [jj], source_etype=celt), typ=celt)
            ej = builder.fmul(builder.load(eptr, typ=dbl), context.cast(builder, cnt, cty.dtype, types.float64))
            builder.store(ej, eptr)
            builder.store(builder.fadd(builder.load(lanes[0][0], typ=dbl), ej), lanes[0][0])
            for c in range(nval):
                wv = builder.load(builder.gep(wrows[c], [jj], source_etype=dbl), typ=dbl)
                term = builder.fmul(ej, builder.fsub(wv, ref[c]))
                builder.store(builder.fadd(builder.load(lanes[1 + c][0], typ=dbl), term), lanes[1 + c][0])
        sums = [
            builder.fadd(builder.fadd(builder.load(s0, typ=dbl), s1), builder.fadd(s2, s3)) for s0, s1, s2, s3 in lanes
        ]
        return context.make_tuple(builder, signature.return_type, sums)

    return sig, codegen


@intrinsic
def add_scaled_four(typingctx, P, row, G, x):  # pragma: no cover - compiled
    """``P[row, 1:5] += G[0:4] x`` as one vector of four: each product ``G[c] x`` and each sum rounded as
    ``P[row, 1 + c] += G[c] * x`` rounds it, so the bits are those of the four scalar updates. ``P`` a C-contiguous
    float64 table at least five wide, ``G`` C-contiguous float64 with at least four entries (the caller's sizes)."""
    f64 = (types.float64,)
    if not (_is_c_array(P, f64) and P.ndim == 2 and _is_c_array(G, f64) and G.ndim == 1 and P.mutable):
        return None
    sig = types.void(P, row, G, x)

    def codegen(context, builder, signature, args):
        pty, rty, gty, xty = signature.args
        pa = context.make_array(pty)(context, builder, args[0])
        ga = context.make_array(gty)(context, builder, args[2])
        intp = context.get_value_type(types.intp)
        dbl, i32 = ir.DoubleType(), ir.IntType(32)
        v4 = ir.VectorType(dbl, 4)
        rowv = context.cast(builder, args[1], rty, types.intp)
        xv = context.cast(builder, args[3], xty, types.float64)
        at = builder.add(builder.mul(rowv, builder.extract_value(pa.shape, 1)), ir.Constant(intp, 1))
        xs = ir.Constant(v4, ir.Undefined)
        for q in range(4):
            xs = builder.insert_element(xs, xv, ir.Constant(i32, q))
        ptr = builder.bitcast(builder.gep(pa.data, [at], source_etype=dbl), v4.as_pointer())
        g = _vector_at(builder, ga.data, ir.Constant(intp, 0), dbl, 4)
        builder.store(builder.fadd(builder.load(ptr, align=8, typ=v4), builder.fmul(g, xs)), ptr, align=8)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch_row(typingctx, E, s, j0, j1):  # pragma: no cover - compiled
    """Ask the processor to bring ``E[s, j0:j1]`` (a C-contiguous 2-D array) into its caches ahead of use: one
    prefetch per 64 bytes, which changes nothing but the time of the loads that follow."""
    if not (isinstance(E, types.Array) and E.layout == "C" and E.ndim == 2):
        return None
    sig = types.void(E, s, j0, j1)

    def codegen(context, builder, signature, args):
        ety, sty, j0ty, j1ty = signature.args
        ea = context.make_array(ety)(context, builder, args[0])
        intp = context.get_value_type(types.intp)
        sv, j0v, j1v = (
            context.cast(builder, v, t, types.intp) for v, t in zip(args[1:], (sty, j0ty, j1ty), strict=True)
        )
        elt = context.get_data_type(ety.dtype)
        per_line = ir.Constant(intp, 64 // context.get_abi_sizeof(elt))
        row = builder.mul(sv, builder.extract_value(ea.shape, 1))
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        lines = builder.udiv(builder.sub(j1v, j0v), per_line)
        with cgutils.for_range(builder, lines) as loop:
            at = builder.add(row, builder.add(j0v, builder.mul(loop.index, per_line)))
            ptr = builder.bitcast(builder.gep(ea.data, [at], source_etype=elt), i8p)
            builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen

"""One tensor program as a GLSL 450 compute shader, and its kernel record.

The shader ABI (what runtime_c/vulkan binds):
1. `layout(local_size_x = L, local_size_x_id = 0) in;`: 1-D workgroups whose
   size is specialization constant 0 (default L, the record's local_size_x).
2. Binding i of set 0 is the i-th of `program.params` (inputs readonly,
   outputs never loaded writeonly): `buffer B<i> { T v[]; } b<i>;`. Element
   types: float32 (float), int32 (int), uint32 (uint), int64 (int: two words
   per element, low then high), bool, int8 and uint8 (uint: four bytes per
   word, byte j in bits 8 (j % 4) .. 8 (j % 4) + 7 of word j / 4), int16 and
   uint16, float16 and bfloat16 (uint: two per word, element j in the low
   half of word j / 2 when j is even), float64 (uint: two words per
   element, low then high, read with packDouble2x32); anything else is
   refused naming the buffer and its dtype.
3. The std430 block `pc`: `uint groups_x; uint items; uint off[NB];
   int size[NS];` (2 + NB + NS words): a push-constant block up to 128 bytes,
   past that a readonly storage buffer at binding NB with the same members.
   `off[i]` is buffer i's first element inside its binding; `size[k]` the
   k-th size parameter.
4. `gid` (the invocation index over the dispatch folded into x, y, z) is
   checked first: `if (gid >= pc.items) return;`. The kernel has no
   barriers, so returning early is safe; kernels with shared memory will
   guard their body with `if (gid < pc.items)` instead and keep the barrier
   outside it.
5. The grid (grid.py) is the leading independent loop nest, collapsed; the
   record's `items` is the product of its extents (an IntExpr over the size
   parameters, and `items_c`, the same as C text over their names); the
   invocation recovers its loop variables from gid by division and modulo,
   the innermost loop fastest. Everything else is serial in the invocation.

Integers: index arithmetic (int64 in the IR) is 32-bit `int` here. Every
index expression emitted is proven to lie in [-2^31, 2^31) from the size
variables' bounds (a loop variable ranges over [0, extent - 1]); sums and
products wrap modulo 2^32, so only the final value of each expression, and
of every division, modulo, min and max operand, needs the bound. Each
buffer's element count must be proven below 2^31 as well: give the size
variables upper bounds (`SizeVar("n", upper=...)`), or the kernel is refused
naming the buffer. Other int64 values are 32-bit `int` only where their low
32 bits are all that is used ("wrapping" contexts: the operand of a cast to
int32 / uint32, the value stored to an int64 local, and, inside those, the
operands of + - * and the arms of a select): the integer sums, products and
convolutions that accumulate in int64 and store int32 are exact modulo 2^32
there, as the C backend's truncating cast leaves them. An int64 local read,
or int64 arithmetic done, anywhere else (a division, a comparison, a cast to
float) is refused; casts of 32-bit integers and booleans to int64 are kept.

int64 buffers: every int64 value in device memory lies in [-2^30, 2^30)
(DATA64): the host checks the int64 inputs of a run before upload (a value
outside is RXE_ERR_BOUND naming the input), the build checks the int64
weights (module.py), and a kernel storing to an int64 buffer must prove the
value it stores lies there (else it is refused: "int64 store may exceed
2^30"). So a load reads the low word alone, and int64 + - * min max of
loaded values (the index normalization of take / gather, `x < 0 ? x + n :
x`) are exact in 32 bits wherever the interval of the result (data_range)
fits int32; anything past that is refused ("int64 arithmetic on data"). A
store writes the low word and the sign-extended high word.

Packed buffers (bool, int8, uint8, int16, uint16; PACKED): a load
extracts its element with bitfieldExtract (sign-extended for int8 and
int16; a bool compares its byte with 0). A store computes its value first
(in place, the bits it reads are the ones it clears), then goes through
atomicAnd (clearing the element's bits) and atomicOr: each invocation writes
distinct elements (the grid's independence), so the two atomics leave the
word's other elements, which other invocations write at the same time,
intact. Packed views start on a word (the runtime refuses others). Narrow
integer values are `int` in expressions, as C promotes them; a cast to a
narrow type, a store to a narrow local and a narrow Let keep the low bits
(sign-extended for the signed ones), as C's conversions do.

float16 and bfloat16 buffers are packed the same way and hold the IEEE
binary16 / bfloat16 bits; in expressions their values are float (the device
needs no shaderFloat16): widened after a load, and rounded to nearest even
where stored (a buffer or a local array) or cast, by integer helpers that
give runtime_c/src/half.c's bits (subnormals kept, NaN quiet), as the C
backend computes them. A Let of them is not rounded (nor is it in C).

float64 values are GLSL `double` (the record's flags carry KERNEL_FP64, and
the runtime refuses a device without shaderFloat64, naming it): + - * /,
comparisons, min / max, floor, ceil, abs, roundEven and sqrt (a helper: NaN
below 0), casts to and from every type but int64; exp, log, pow and the
trigonometric functions, which GLSL defines for float only, are refused.
Vulkan promises double operations only float32's precision; lavapipe's are
IEEE (tests/vulkan/test_glsl_dtypes.py checks them bit for bit there).

Statements: Store, Let, Allocate (local arrays of constant size, at most
LOCAL_BYTES bytes), IfThenElse and the loops. Vectorized and unrolled loops
are emitted as plain scalar loops in this version. Assert: the device cannot
raise an error, so a kernel with asserts gets one more storage binding, a
status block (`uint v[]`, STATUS_WORDS words at its view's offset) right
after its parameters (binding NB; its offset is off[NB], so num_buffers and
push_words count it, and the push fallback buffer moves to NB + 1). A failed
condition sets bit min(k, 31) of word 0 (k: the assert's index in the
record's `asserts`), and the first invocation to claim word 1 stores k in
word 2 and the assert's values (as int32, at most STATUS_VALUES) from word 3;
then the invocation returns before the access it guards. The host reads the
block after the run and raises the assert's message (`asserts`: the C
backend's printf format, placeholders past STATUS_VALUES printed as `?`)
with the recorded values (module.py).

Math (float32 only): exp, sqrt, floor, ceil, fabs (abs) and round
(roundEven: the IR rounds half to even, like rint) are GLSL built-ins;
log, sqrt and pow go through helpers that give the C library's values where
GLSL leaves them undefined (log of 0 and of negatives, sqrt of negatives,
pow of negative or zero bases); tanh is a helper: an odd series below
|x| = 0.25, else 1 - 2 / (exp(2|x|) + 1), 1 past |x| = 9; erf is a helper:
the Maclaurin series to x^11 below |x| = 0.5, else Abramowitz and Stegun
7.1.26 (absolute error 1.5e-7 by the formula), 1 past |x| = 4. Evaluated in
float32 with a correctly rounded exp, these stay within 3.1e-7 relative
(tanh) and 3.3e-7 absolute, 5.7e-7 relative (erf) on (0, 6]; a device's exp
adds its own error (Vulkan allows 3 + 2|x| ulp). sin, cos, tan, asin, acos,
atan, sinh, cosh, asinh, acosh, atanh and fmod are helpers too (GLSL's
sin/cos only promise 2^-11 absolute in Vulkan, its exp an error growing
with |x|): sin, cos and tan reduce x by pi/2 in four parts (Cody-Waite,
`precise` so the driver keeps the order), exact for |x| < 1e5; past that x
is first reduced exactly modulo float32(2 pi), which is 2 pi + 1.7e-7, so
the result there is the sine of a shifted argument (an absolute error
near |x| 3e-8: 0.03 at 1e6, no meaning past 1e7, still in [-1, 1]).
sinh and cosh use their own exp (x - k ln 2 in two parts, 2^k by ldexp),
the inverse functions Cephes' polynomials near 0 and their logarithmic
forms elsewhere; fmod is exact (C's fmod: |y| scaled by powers of two and
subtracted). On lavapipe all stay within 4 ulp of numpy's float64 values
rounded to float32 (tests/vulkan/test_glsl_math.py) over their domains,
sin, cos and tan for |x| < 1e5.
Integer floor division and modulo follow the IR (floor, the sign of the
divisor), through helpers unless the prover shows both operands
non-negative; &, |, ^, << and >> on int32 / uint32 (see BIT_OPS); min and
max are `a > b ? a : b` as in C (NaN behaves as there).
Float constants are printed with 9 significant digits (exact for float32);
infinities and NaN through uintBitsToFloat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...errors import RelaxEdgeError
from ...ir.shape import IntExpr, SizeVar, bounds, substitute
from ...tir.expr import BinOp, Cast, Const, Index, Load, Select
from ...tir.program import TensorProgram
from ...tir.render import IndentedLines, Renderer
from ...tir.stmt import Allocate, Assert, For, IfThenElse, Let, Store
from ...tir.visit import StmtVisitor, map_expr
from ..c.kernel import CRenderer
from ..kernel_skeleton import KernelSkeleton
from .grid import map_grid

__all__ = ["emit_glsl", "KernelRecord", "GlslUnsupported", "GLSL_TYPES", "PUSH_CONSTANT_WORDS", "LOCAL_BYTES",
           "STATUS_WORDS", "STATUS_VALUES"]

PUSH_CONSTANT_WORDS = 32   # 128 bytes: Vulkan's guaranteed maxPushConstantsSize
LOCAL_BYTES = 4096         # the largest local array an invocation declares
STATUS_VALUES = 13         # assert values a status block records
STATUS_WORDS = 3 + STATUS_VALUES   # mask, claim, the recorded assert's index, its values
INT32 = 2 ** 31
DATA64 = 2 ** 30           # every int64 value in device memory lies in [-DATA64, DATA64) (module docstring)

# buffer element types of this version
GLSL_TYPES = {"float32": "float", "int32": "int", "uint32": "uint", "int64": "int", "bool": "uint",
              "int8": "uint", "uint8": "uint", "int16": "uint", "uint16": "uint", "float16": "uint",
              "bfloat16": "uint", "float64": "uint"}
# element types packed several to a uint word: their width in bits
PACKED = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "uint16": 16, "float16": 16, "bfloat16": 16}
NARROW = {"int8": (8, True), "uint8": (8, False), "int16": (16, True), "uint16": (16, False)}
# float16 and bfloat16 in expressions: float, widened after a load, rounded (to nearest even) where stored or
# cast, as the C backend's rxe_half / rxe_bfloat (runtime_c/src/half.c) leave them: the helpers' names
NARROW_FLOATS = {"float16": ("rxe_f16_widen", "rxe_f16_narrow"), "bfloat16": ("rxe_bf16_widen", "rxe_bf16_narrow")}
# types of values in expressions: int64 values are 32-bit (see the module docstring), the narrow integers int as
# C's promotion makes them
VALUE_TYPES = {**GLSL_TYPES, "bool": "bool", "int64": "int", **{t: "int" for t in NARROW},
               **{t: "float" for t in NARROW_FLOATS}, "float64": "double"}
# KernelRecord.flags (runtime_c's rxe_vk_kernel_t.flags): the shader uses double (shaderFloat64)
KERNEL_FP64 = 2
# the float64 math GLSL defines for double (exp, log, pow and the trigonometric functions it has only for float)
DOUBLE_MATH = {"floor": "floor", "ceil": "ceil", "fabs": "abs", "round": "roundEven"}
# the values of integer loads and casts (data_range)
INT_RANGES = {"int32": (-INT32, INT32 - 1), "uint32": (0, 2 * INT32 - 1), "bool": (0, 1), "int8": (-128, 127),
              "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535)}


def narrow(x: str, dtype: str) -> str:
    """int value `x` wrapped to narrow integer type `dtype` (its low bits, sign-extended for the signed ones),
    as C's conversion to it leaves them."""
    bits, signed = NARROW[dtype]
    return f"bitfieldExtract(int({x}), 0, {bits})" if signed else f"(int({x}) & {(1 << bits) - 1})"

GLSL_RESERVED = frozenset("""attribute const uniform varying buffer shared coherent volatile restrict readonly
writeonly layout centroid flat smooth noperspective patch sample break continue do for while switch case default
if else subroutine in out inout float double int void bool true false invariant precise discard return mat2 mat3
mat4 vec2 vec3 vec4 ivec2 ivec3 ivec4 bvec2 bvec3 bvec4 uint uvec2 uvec3 uvec4 dvec2 dvec3 dvec4 lowp mediump
highp precision struct common partition active asm class union enum typedef template this resource goto inline
noinline public static extern external interface long short half fixed unsigned superp input output filter
sizeof cast namespace using main gid pc abs sign floor ceil trunc round roundEven fract mod min max clamp mix step
exp log exp2 log2 sqrt inversesqrt pow sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh isnan isinf
length dot cross normalize any all not uintBitsToFloat floatBitsToUint intBitsToFloat floatBitsToInt
v off size items groups_x""".split())


class GlslUnsupported(RelaxEdgeError):
    """A construct the GLSL emitter does not handle yet; `reason` is a short
    key for it (e.g. "dtype int64", "intrinsic sin")."""

    def __init__(self, program: str, reason: str, detail: str):
        super().__init__(f"GLSL kernel {program}: {detail} (not supported yet: {reason})")
        self.reason = reason


@dataclass
class KernelRecord:
    """The Python side of runtime_c's rxe_vk_kernel_t, plus what the host needs
    to dispatch it: `items` (IntExpr over `size_params`), `items_c` (the same as
    C text over their names), `grid` (the loop variables mapped to the grid),
    `push_in_buffer` (the block is a storage buffer at binding num_buffers)
    `asserts` (the printf formats of the device's checks, see Assert) and
    `status` (the kernel has a status binding, the last of its num_buffers)."""
    name: str
    num_buffers: int
    push_words: int
    local_size_x: int
    shared_bytes: int
    flags: int
    items: IntExpr
    items_c: str
    size_params: tuple
    grid: tuple
    push_in_buffer: bool
    asserts: list = field(default_factory=list)
    status: bool = False
    stored: dict = field(default_factory=dict)   # int64 buffer name -> (lo, hi) of the values its stores write


def _f64_literal(value: float) -> str:
    """A double constant: the shortest decimal that reads back as `value` (glslang parses it correctly rounded)."""
    if math.isnan(value) or math.isinf(value):
        bits = int(np.array(value, dtype=np.float64).view(np.uint64))
        return f"packDouble2x32(uvec2({bits & 0xffffffff:#x}u, {bits >> 32:#x}u))"
    text = repr(float(value))
    return (text if any(c in text for c in ".e") else text + ".0") + "lf"


def _f32_literal(value: float) -> str:
    if math.isnan(value):
        return "uintBitsToFloat(0x7fc00000u)"
    if math.isinf(value):
        return f"uintBitsToFloat({'0xff800000u' if value < 0 else '0x7f800000u'})"
    f = np.float32(value)
    if np.isinf(f):   # a double past float32's range: C's `f` suffix rounds it to infinity too
        return _f32_literal(float(f))
    text = f"{float(f):.9g}"
    return text if any(c in text for c in ".en") else text + ".0"


HELPERS = {
    # runtime_c/src/half.c in integer operations: the same bits on every device (no float16 arithmetic needed)
    "float16": """float rxe_f16_widen(uint h) {
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
    if (e != 0u) return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
    if (m == 0u) return uintBitsToFloat(sign);
    uint top = uint(findMSB(m));   /* a subnormal: normalized */
    return uintBitsToFloat(sign | ((103u + top) << 23) | (((m << (10u - top)) & 0x3ffu) << 13));
}
uint rxe_f16_narrow(float x) {
    uint u = floatBitsToUint(x), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u | ((a >> 13) & 0x3ffu);
    if (a >= 0x477ff000u) return sign | 0x7c00u;
    if (a >= 0x38800000u) {
        uint r = a - 0x38000000u;
        return sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
    }
    if (a < 0x33000000u) return sign;
    uint m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
    uint q = m >> shift, rest = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rest > half_ || (rest == half_ && (q & 1u) != 0u)) q += 1u;
    return sign | q;
}
""",
    "bfloat16": """float rxe_bf16_widen(uint h) { return uintBitsToFloat(h << 16); }
uint rxe_bf16_narrow(float x) {
    uint u = floatBitsToUint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
""",
    "floordiv": """int rxe_floordiv(int a, int b) {
    int q = a / b;
    return (a - q * b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
""",
    "floormod": """int rxe_floormod(int a, int b) {
    int r = a - (a / b) * b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
""",
    "minmax": """float rxe_min(float a, float b) { return a < b ? a : b; }
float rxe_max(float a, float b) { return a > b ? a : b; }
int rxe_min(int a, int b) { return a < b ? a : b; }
int rxe_max(int a, int b) { return a > b ? a : b; }
uint rxe_min(uint a, uint b) { return a < b ? a : b; }
uint rxe_max(uint a, uint b) { return a > b ? a : b; }
""",
    "log": """float rxe_log(float x) {
    if (x == 0.0) return uintBitsToFloat(0xff800000u);
    if (!(x > 0.0)) return uintBitsToFloat(0x7fc00000u);
    return log(x);
}
""",
    "minmax64": """double rxe_min(double a, double b) { return a < b ? a : b; }
double rxe_max(double a, double b) { return a > b ? a : b; }
""",
    "sqrt64": """double rxe_sqrt64(double x) {
    return x < 0.0lf ? packDouble2x32(uvec2(0u, 0x7ff80000u)) : sqrt(x);
}
""",
    "sqrt": """float rxe_sqrt(float x) {
    return x < 0.0 ? uintBitsToFloat(0x7fc00000u) : sqrt(x);
}
""",
    "pow": """float rxe_pow(float x, float y) {
    if (y == 0.0) return 1.0;
    if (isnan(x) || isnan(y)) return uintBitsToFloat(0x7fc00000u);
    if (x == 0.0) {
        bool odd = floor(y) == y && mod(y, 2.0) == 1.0;
        float mag = y > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
        return odd && floatBitsToUint(x) != 0u ? -mag : mag;
    }
    if (x > 0.0) return pow(x, y);
    if (floor(y) != y) return uintBitsToFloat(0x7fc00000u);
    float m = pow(-x, y);
    return mod(y, 2.0) == 1.0 ? -m : m;
}
""",
    "tanh": """float rxe_tanh(float x) {
    float a = abs(x);
    float t;
    if (a < 0.25) {
        float z = a * a;
        t = a * (1.0 + z * (-0.333333333 + z * (0.133333333 + z * (-0.0539682540
            + z * (0.0218694885 + z * -0.00886323552)))));
    } else if (a < 9.0) {
        t = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    } else {
        t = 1.0;
    }
    return x < 0.0 ? -t : t;
}
""",
    "erf": """float rxe_erf(float x) {
    float a = abs(x);
    float e;
    if (a < 0.5) {
        float z = a * a;
        e = 1.12837917 * a * (1.0 + z * (-0.333333333 + z * (0.1 + z * (-0.0238095238
            + z * (0.00462962963 + z * -0.000757575758)))));
    } else if (a < 4.0) {
        float t = 1.0 / (1.0 + 0.3275911 * a);
        float p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        e = 1.0 - p * exp(-a * a);
    } else {
        e = 1.0;
    }
    return x < 0.0 ? -e : e;
}
""",
    # sin, cos and tan: the quadrant k from x * 2/pi, x - k pi/2 in four parts (Cody-Waite: the first three of 8
    # bits, so k times each is exact for |k| < 2^16, i.e. |x| < 1.0e5; past that the reduction loses bits),
    # Cephes' minimax polynomials on [-pi/4, pi/4]; the same on every driver (GLSL's builtins promise 2^-11).
    # `precise`: the driver may neither refactor k * c1 + k * c2 into k * (c1 + c2) nor fuse the steps
    "sincos": """float rxe_sincos_r(float x, out int q) {
    if (abs(x) > 1.0e5) x = rxe_fmod(x, 6.28318548);   // exact, but modulo float32(2 pi): see the docstring
    float k = roundEven(x * 0.636619772);
    q = int(k);
    precise float r = (((x - k * 1.5703125) - k * 4.84466552734375e-4) - k * -6.407499313354492e-7)
        - k * 9.92093629e-10;
    return r;
}
float rxe_sin_poly(float r) {
    float z = r * r;
    return r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
}
float rxe_cos_poly(float r) {
    float z = r * r;
    return 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
}
float rxe_sin(float x) {
    if (isinf(x) || isnan(x)) return uintBitsToFloat(0x7fc00000u);
    int q;
    float r = rxe_sincos_r(x, q);
    float v = (q & 1) == 0 ? rxe_sin_poly(r) : rxe_cos_poly(r);
    return (q & 2) == 0 ? v : -v;
}
float rxe_cos(float x) {
    if (isinf(x) || isnan(x)) return uintBitsToFloat(0x7fc00000u);
    int q;
    float r = rxe_sincos_r(x, q);
    float v = (q & 1) == 0 ? rxe_cos_poly(r) : rxe_sin_poly(r);
    return ((q + 1) & 2) == 0 ? v : -v;
}
float rxe_tan(float x) {
    if (isinf(x) || isnan(x)) return uintBitsToFloat(0x7fc00000u);
    int q;
    float r = rxe_sincos_r(x, q);
    float s = rxe_sin_poly(r), c = rxe_cos_poly(r);
    return (q & 1) == 0 ? s / c : -c / s;
}
""",
    # asin and acos: Cephes' polynomial of asin on [0, 0.5]; past 0.5 through asin(a) = pi/2 - 2 asin(sqrt((1 - a)
    # / 2)); pi/2 and pi as a float32 head and tail
    "asin": """float rxe_asin_small(float a, float z) {   // asin(a), 0 <= a <= 0.5, z = a * a
    return a + a * z * (1.6666752422e-1 + z * (7.4953002686e-2 + z * (4.5470025998e-2 + z * (2.4181311049e-2
        + z * 4.2163199048e-2))));
}
float rxe_asin(float x) {
    float a = abs(x);
    if (!(a <= 1.0)) return uintBitsToFloat(0x7fc00000u);
    if (a <= 0.5) return rxe_asin_small(x, x * x);
    float z = 0.5 * (1.0 - a);
    float v = (1.57079637 - 2.0 * rxe_asin_small(sqrt(z), z)) - 4.37113883e-8;
    return x < 0.0 ? -v : v;
}
float rxe_acos(float x) {
    float a = abs(x);
    if (!(a <= 1.0)) return uintBitsToFloat(0x7fc00000u);
    if (a <= 0.5) return (1.57079637 - rxe_asin_small(x, x * x)) - 4.37113883e-8;
    float z = 0.5 * (1.0 - a);
    float v = 2.0 * rxe_asin_small(sqrt(z), z);
    return x < 0.0 ? (3.14159274 - v) - 8.74227766e-8 : v;
}
""",
    # atan: Cephes' reduction to |t| <= tan(pi/8) (t = -1/a past tan(3pi/8), (a - 1)/(a + 1) past tan(pi/8)) and
    # its polynomial
    "atan": """float rxe_atan(float x) {
    if (isnan(x)) return x;
    float a = abs(x), base = 0.0, tail = 0.0;
    if (a > 2.41421356) {
        base = 1.57079637; tail = -4.37113883e-8; a = -1.0 / a;
    } else if (a > 0.414213562) {
        base = 0.785398185; tail = -2.18556941e-8; a = (a - 1.0) / (a + 1.0);
    }
    float z = a * a;
    float p = a + a * z * (-3.33329491539e-1 + z * (1.99777106478e-1 + z * (-1.38776856032e-1
        + z * 8.05374449538e-2)));
    float v = base + (p + tail);
    return x < 0.0 ? -v : v;
}
""",
    # exp for sinh and cosh: GLSL's exp may scale x by log2(e) first, an error that grows with |x| (Vulkan
    # allows 3 + 2|x| ulp); here x - k ln 2 in two parts (exact for |k| < 2^15, `precise` as for sin), Cephes'
    # polynomial on [-ln 2 / 2, ln 2 / 2], then 2^k; for |x| < 88.7 (the callers keep it there)
    "exp": """float rxe_exp(float x) {
    float k = floor(x * 1.44269504 + 0.5);
    precise float r = (x - k * 0.693359375) - k * -2.12194440e-4;
    float p = ((((((1.9875691500e-4 * r + 1.3981999507e-3) * r + 8.3334519073e-3) * r + 4.1665795894e-2) * r
        + 1.6666665459e-1) * r + 5.0000001201e-1) * r * r + r) + 1.0;
    return ldexp(p, int(k));
}
""",
    # sinh and cosh: an odd polynomial (Cephes) below |x| = 1, else from exp(|x|); past 88 (where exp
    # overflows while the result does not yet) as (exp(|x| / 2) / 2) exp(|x| / 2), infinite past 89.5
    "sinh": """float rxe_sinh(float x) {
    float a = abs(x);
    if (a < 1.0) {
        float z = x * x;
        return x + x * z * (1.66667160211e-1 + z * (8.33028376239e-3 + z * 2.03721912945e-4));
    }
    float s = rxe_cosh_sinh(a, -1.0);
    return x < 0.0 ? -s : s;
}
""",
    "cosh": """float rxe_cosh_sinh(float a, float sign) {   // cosh(a) (sign 1) or sinh(a) (sign -1), a >= 0
    if (isnan(a)) return a;
    if (a < 88.0) {
        float e = rxe_exp(a);
        return 0.5 * e + sign * (0.5 / e);
    }
    if (a > 89.5) return uintBitsToFloat(0x7f800000u);
    float h = rxe_exp(0.5 * a);
    return (0.5 * h) * h;
}
float rxe_cosh(float x) {
    return rxe_cosh_sinh(abs(x), 1.0);
}
""",
    # asinh, acosh, atanh: Cephes' polynomials near 0 (near 1 for acosh), the logarithmic forms elsewhere, log(a) +
    # log(2) past 1e4 (where a * a would lose the 1)
    "asinh": """float rxe_asinh(float x) {
    float a = abs(x);
    if (a < 0.5) {
        float z = x * x;
        return x + x * z * (-1.6666288134e-1 + z * (7.4847586088e-2 + z * (-4.2699340972e-2 + z * 2.0122003309e-2)));
    }
    float s = a > 1.0e4 ? log(a) + 0.693147181 : log(a + sqrt(a * a + 1.0));
    return x < 0.0 ? -s : s;
}
""",
    "acosh": """float rxe_acosh(float x) {
    if (!(x >= 1.0)) return uintBitsToFloat(0x7fc00000u);
    float z = x - 1.0;
    if (z < 0.5) {
        return sqrt(z) * (1.4142135263 + z * (-1.1784741703e-1 + z * (2.6454905019e-2 + z * (-7.5272886713e-3
            + z * 1.7596881071e-3))));
    }
    return x > 1.0e4 ? log(x) + 0.693147181 : log(x + sqrt(z * (x + 1.0)));
}
""",
    "atanh": """float rxe_atanh(float x) {
    float a = abs(x);
    if (!(a <= 1.0)) return uintBitsToFloat(0x7fc00000u);
    if (a == 1.0) return uintBitsToFloat(x > 0.0 ? 0x7f800000u : 0xff800000u);
    if (a < 0.5) {
        float z = x * x;
        return x + x * z * (3.33337300303e-1 + z * (1.99782164500e-1 + z * (1.46691431730e-1 + z * (8.24370301058e-2
            + z * 1.81740078349e-1))));
    }
    float s = 0.5 * log((1.0 + a) / (1.0 - a));
    return x < 0.0 ? -s : s;
}
""",
    # fmod as C's (exact): |y| scaled by a power of two to the largest multiple not above the remainder, then
    # subtracted (exact: d <= r < 2d), once per binary digit of the quotient; the sign of x
    "fmod": """float rxe_fmod(float x, float y) {
    if (isnan(x) || isnan(y) || isinf(x) || y == 0.0) return uintBitsToFloat(0x7fc00000u);
    float r = abs(x), b = abs(y);
    if (isinf(y) || r < b) return x;
    int eb;
    frexp(b, eb);
    while (r >= b) {
        int er;
        frexp(r, er);
        float d = ldexp(b, er - eb);
        if (d > r) d = ldexp(b, er - eb - 1);
        r -= d;
    }
    return x < 0.0 ? -r : r;
}
""",
}
# helpers a helper calls, emitted before it
HELPER_NEEDS = {"sinh": ("exp", "cosh"), "cosh": ("exp",), "sincos": ("fmod",)}
HELPER_OF = {"sin": "sincos", "cos": "sincos", "tan": "sincos", "acos": "asin"}   # helpers under another key
HELPER_NAMES = ("sin_poly", "cos_poly", "sincos_r", "asin_small", "cosh_sinh",   # the helpers' inner functions
                *(f[4:] for pair in NARROW_FLOATS.values() for f in pair))
BUILTIN_MATH = {"exp": "exp", "floor": "floor", "ceil": "ceil", "fabs": "abs", "round": "roundEven"}
HELPER_MATH = ("log", "sqrt", "pow", "tanh", "erf", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "fmod")
# int32 / uint32 bit operations; shift counts past 31 give what the C backend's 64-bit shifts leave in the
# low 32 bits (0, or the sign for >> of an int), where GLSL leaves them undefined
BIT_OPS = {"bitand": "({a} & {b})", "bitor": "({a} | {b})", "bitxor": "({a} ^ {b})",
           "shl": "(uint({b}) > 31u ? 0{u} : {a} << uint({b}))", "shr": "({a} >> min(uint({b}), 31u))",
           "shr_u": "(uint({b}) > 31u ? 0u : {a} >> uint({b}))"}


class GlslRenderer(Renderer):
    """The expression table: tir/render.py's walk with GLSL's operators and types."""

    BINARY = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})"}
    LOGICAL = {"and": "({a} && {b})", "or": "({a} || {b})"}
    NOT = "(!{a})"
    SELECT = "({c} ? {a} : {b})"
    RESERVED = GLSL_RESERVED

    def __init__(self, kernel: GlslKernel):
        super().__init__()
        self.k = kernel

    def refuse(self, reason: str, detail: str):
        raise GlslUnsupported(self.k.program.name, reason, detail)

    def value_type(self, dtype: str) -> str:
        if dtype not in VALUE_TYPES:
            self.refuse(f"dtype {dtype}", f"a {dtype} value")
        if dtype == "float64":
            self.k.flags |= KERNEL_FP64
        return VALUE_TYPES[dtype]

    def helper(self, key: str, call: str) -> str:
        for needed in HELPER_NEEDS.get(key, ()):
            self.helper(needed, "")
        self.k.helpers.setdefault(key, HELPERS[key])
        return call

    # integers --------------------------------------------------------------
    def int_expr(self, e):
        """Index arithmetic as 32-bit int, once its value is proven to fit."""
        lo, hi = bounds(substitute(e, self.k.loop_bounds))
        if lo < -INT32 or hi >= INT32:
            self.refuse("index may exceed 32 bits",
                        f"index expression {e} lies in [{lo}, {hi}] under the size bounds, outside 32-bit int "
                        f"(bound the size variables with SizeVar(name, upper=...))")
        return super().int_expr(e)

    def size_value(self, var: SizeVar) -> str:
        return self.name(var, var.name)

    def int_const(self, k: int) -> str:
        if not -INT32 <= k < INT32:
            self.refuse("constant exceeds 32 bits", f"integer constant {k}")
        return str(k)

    def int_division(self, kind, x, y, nonneg):
        if nonneg:
            return f"({x} / {y})" if kind == "div" else f"({x} % {y})"
        name = "floordiv" if kind == "div" else "floormod"
        return self.helper(name, f"rxe_{name}({x}, {y})")

    def int_minmax(self, kind, x, y):
        return f"{kind}({x}, {y})"

    # expressions -----------------------------------------------------------
    wrapping = False   # only the low 32 bits of the value being rendered are used (module docstring)

    def expr(self, e, wrapping: bool = False) -> str:
        """`e` as text; `wrapping`: the context uses only its low 32 bits."""
        outer, self.wrapping = self.wrapping, wrapping
        try:
            return self.visit(e)
        finally:
            self.wrapping = outer

    def data_range(self, e):
        """(lo, hi) bounding the exact value of integer expression `e`, or
        None where no bound is known (see the module docstring)."""
        if isinstance(e, Const) and isinstance(e.value, (int, np.integer, bool)):
            return int(e.value), int(e.value)
        if isinstance(e, Index):
            lo, hi = bounds(substitute(e.value, self.k.loop_bounds))
            return None if math.inf in (abs(lo), abs(hi)) else (int(lo), int(hi))
        if isinstance(e, Load):
            if e.buffer.dtype == "int64":
                return None if e.buffer in self.k.locals else self.k.ranges.get(e.buffer.name, (-DATA64, DATA64 - 1))
            return None if e.buffer.dtype == "uint32" else INT_RANGES.get(e.buffer.dtype)
        if isinstance(e, Cast):
            if e.a.dtype == "int64":
                return self.data_range(e.a)
            return INT_RANGES.get(e.a.dtype)
        if isinstance(e, Select):
            a, b = self.data_range(e.a), self.data_range(e.b)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(e, BinOp) and e.op in ("add", "sub", "mul", "min", "max"):
            a, b = self.data_range(e.a), self.data_range(e.b)
            if a is None or b is None:
                return None
            if e.op == "add":
                return a[0] + b[0], a[1] + b[1]
            if e.op == "sub":
                return a[0] - b[1], a[1] - b[0]
            if e.op == "min":
                return min(a[0], b[0]), min(a[1], b[1])
            if e.op == "max":
                return max(a[0], b[0]), max(a[1], b[1])
            corners = [x * y for x in a for y in b]
            return min(corners), max(corners)
        return None

    def visit_BinOp(self, e) -> str:
        self.value_type(e.dtype)
        if e.dtype == "int64":
            if self.wrapping and e.op in ("add", "sub", "mul"):
                return self.binary(e.op, self.expr(e.a, True), self.expr(e.b, True), e.dtype)
            r = self.data_range(e)
            if e.op not in ("add", "sub", "mul", "min", "max") or r is None or r[0] < -INT32 or r[1] >= INT32:
                self.refuse("int64 arithmetic on data",
                            f"int64 {e.op} of data values whose result may not fit 32 bits (range {r})")
            return self.binary(e.op, self.expr(e.a), self.expr(e.b), e.dtype)
        return super().visit_BinOp(e)

    def visit_Select(self, e) -> str:
        return self.SELECT.format(c=self.expr(e.cond), a=self.expr(e.a, self.wrapping),
                                  b=self.expr(e.b, self.wrapping))

    def visit_Cast(self, e) -> str:
        wraps = e.a.dtype == "int64" and e.dtype in ("int32", "uint32", *NARROW)
        return self.cast(self.expr(e.a, wraps), e.a.dtype, e.dtype)

    def binary(self, op, a, b, dtype):
        if op in ("floordiv", "floormod"):
            if dtype == "uint32" or (dtype in NARROW and not NARROW[dtype][1]):   # floor is truncation
                return f"({a} {'/' if op == 'floordiv' else '%'} {b})"
            if dtype not in ("int32", "int8", "int16"):
                self.refuse(f"{op} on {dtype}", f"{op} of {dtype} values")
            return self.helper(op, f"rxe_{op}({a}, {b})")
        if op in ("min", "max"):   # the double overloads apart: declaring them needs shaderFloat64
            return self.helper("minmax64" if dtype == "float64" else "minmax", f"rxe_{op}({a}, {b})")
        if op == "pow" and dtype == "float64":
            self.refuse("intrinsic pow on float64", "pow of float64 (GLSL has no double pow)")
        if op == "pow":
            return self.intrinsic("pow", [a, b], dtype)
        if op in BIT_OPS and dtype in ("int32", "uint32", *NARROW):   # narrow values: int, as in C
            key = "shr_u" if op == "shr" and dtype == "uint32" else op
            return BIT_OPS[key].format(a=a, b=b, u="u" if dtype == "uint32" else "")
        if op not in self.BINARY:
            self.refuse(f"operator {op}", f"binary operator {op} on {dtype}")
        return super().binary(op, a, b, dtype)

    def constant(self, value, dtype):
        self.value_type(dtype)
        if dtype == "bool":
            return "true" if value else "false"
        if dtype == "float32" or dtype in NARROW_FLOATS:   # a narrow float's value is exact in float32
            return _f32_literal(float(value))
        if dtype == "float64":
            return _f64_literal(float(value))
        if dtype == "uint32":
            return f"{int(value)}u"
        return self.int_const(int(value))

    def cast(self, x, src, dst):
        self.value_type(src)
        t = self.value_type(dst)
        if dst == "int64" and src not in ("int32", "bool", "int64", *NARROW):
            self.refuse(f"cast {src} to int64", f"a cast of {src} to int64 (may not fit 32 bits)")
        if dst == "bool":
            zero = {"float": "0.0", "double": "0.0lf", "uint": "0u", "bool": "false"}.get(VALUE_TYPES.get(src), "0")
            return f"({x} != {zero})"
        if dst in NARROW_FLOATS:   # rounded to the narrow type, held as float
            return self.narrow_float(f"float({x})", dst)
        if dst in NARROW:
            return narrow(x, dst)
        return f"{t}({x})"

    def float_bits(self, x: str, dtype: str) -> str:
        """The 16 bits (a uint) of float value `x` rounded to narrow float type `dtype`."""
        return self.helper(dtype, f"{NARROW_FLOATS[dtype][1]}({x})")

    def float_value(self, bits: str, dtype: str) -> str:
        """The float value of the 16 bits `bits` (a uint) of narrow float type `dtype`."""
        return self.helper(dtype, f"{NARROW_FLOATS[dtype][0]}({bits})")

    def narrow_float(self, x: str, dtype: str) -> str:
        """Float value `x` rounded to narrow float type `dtype`, as a float."""
        return self.float_value(self.float_bits(x, dtype), dtype)

    def reinterpret(self, x, src, dst):
        if src in NARROW_FLOATS or dst in NARROW_FLOATS:   # through the 16 bits
            if {src, dst} - {*NARROW_FLOATS, "int16", "uint16"}:
                self.refuse(f"reinterpret {src} as {dst}", f"the bits of a {src} read as {dst}")
            bits = self.float_bits(x, src) if src in NARROW_FLOATS else f"(uint({x}) & 0xffffu)"
            if dst in NARROW_FLOATS:
                return self.float_value(bits, dst)
            return narrow(bits, dst)
        fn = {("float32", "int32"): "floatBitsToInt", ("float32", "uint32"): "floatBitsToUint",
              ("int32", "float32"): "intBitsToFloat", ("uint32", "float32"): "uintBitsToFloat",
              ("int32", "uint32"): "uint", ("uint32", "int32"): "int"}.get((src, dst))
        if fn is None:
            self.refuse(f"reinterpret {src} as {dst}", f"the bits of a {src} read as {dst}")
        return f"{fn}({x})"

    def intrinsic(self, name, args, dtype):
        if dtype == "float64":
            if name == "sqrt":
                return self.helper("sqrt64", f"rxe_sqrt64({args[0]})")
            if name not in DOUBLE_MATH:
                self.refuse(f"intrinsic {name} on float64", f"{name} of float64 (GLSL defines it for float only)")
            return f"{DOUBLE_MATH[name]}({', '.join(args)})"
        if dtype != "float32" and dtype not in NARROW_FLOATS:   # narrow floats compute in float32
            self.refuse(f"intrinsic {name} on {dtype}", f"{name} of {dtype}")
        if name in BUILTIN_MATH:
            return f"{BUILTIN_MATH[name]}({', '.join(args)})"
        if name in HELPER_MATH or name in HELPER_OF:
            return self.helper(HELPER_OF.get(name, name), f"rxe_{name}({', '.join(args)})")
        return self.refuse(f"intrinsic {name}", f"float32 {name} has no GLSL version here")

    def load(self, e: Load) -> str:
        local = e.buffer in self.k.locals
        if e.buffer.dtype == "int64" and local and not self.wrapping:
            self.refuse("int64 local", f"local buffer {e.buffer.name} is int64 and read where its high bits count")
        if e.buffer.dtype in PACKED and not local:
            word, shift = self.k.byte_address(e.buffer, e.indices)
            if e.buffer.dtype == "bool":
                return f"((({word} >> {shift}) & 0xffu) != 0u)"
            if e.buffer.dtype in NARROW_FLOATS:
                return self.float_value(f"bitfieldExtract({word}, int({shift}), 16)", e.buffer.dtype)
            bits, signed = NARROW[e.buffer.dtype]
            if signed:
                return f"bitfieldExtract(int({word}), int({shift}), {bits})"
            return f"int(bitfieldExtract({word}, int({shift}), {bits}))"
        if e.buffer.dtype == "float64" and not local:
            self.value_type("float64")
            low = self.k.element(e.buffer, e.indices)
            return f"packDouble2x32(uvec2({low}, {low[:-1]} + 1u]))"
        return self.k.element(e.buffer, e.indices)


class _Loaded(StmtVisitor):
    """The buffers a statement loads from."""

    def __init__(self):
        self.buffers: set = set()

    def visit_expr(self, e):
        map_expr(e, lambda n: self.buffers.add(n.buffer) if isinstance(n, Load) else None)


class GlslKernel(IndentedLines, KernelSkeleton):
    """One tensor program as GLSL text (see emit_glsl)."""

    def __init__(self, program: TensorProgram, local_size_x: int, inplace: bool, ranges: dict | None = None):
        super().__init__(program, program.name, inplace)
        self.ranges = dict(ranges or {})   # int64 buffer name -> (lo, hi) its values are known to lie in
        self.stored: dict = {}
        self.local_size_x = local_size_x
        self.r = GlslRenderer(self)
        self.grid = map_grid(program)
        self.loop_bounds: dict = {}   # loop variable -> a variable bounded by its extent, for the 32-bit proofs
        self.helpers: dict = {}
        self.asserts: list = []
        self.locals: set = set()
        self.temps: list = []
        self.lines: list = []
        self.depth = 1
        self.task = "invocation"      # a parallel loop inside the grid runs serially in the invocation
        self.flags = 0                # KERNEL_FP64 once a double is used

    def refuse(self, reason: str, detail: str):
        raise GlslUnsupported(self.program.name, reason, detail)

    def emit(self):
        self.begin()
        self.visit(self.grid.body)
        return self.end()

    def element(self, buffer, indices) -> str:
        index = self.r.expr(buffer.flat_index(indices))
        if buffer in self.locals:
            return f"{self.r.name(buffer, buffer.name)}[{index}]"
        k = self.slot[buffer]
        if buffer.dtype in ("int64", "float64"):   # the low word of the pair
            return f"b{k}.v[pc.off[{k}] + 2u * uint({index})]"
        return f"b{k}.v[pc.off[{k}] + uint({index})]"

    def byte_address(self, buffer, indices):
        """(the word holding element `indices` of packed buffer `buffer`, its bit shift) as text."""
        index = self.r.expr(buffer.flat_index(indices))
        k = self.slot[buffer]
        bits = PACKED[buffer.dtype]
        per = 32 // bits
        return (f"b{k}.v[pc.off[{k}] + (uint({index}) >> {per.bit_length() - 1})]",
                f"((uint({index}) & {per - 1}u) * {bits}u)")

    def bind(self, var, extent) -> None:
        """Bound loop variable `var` by its extent for the 32-bit proofs."""
        hi = bounds(substitute(extent, self.loop_bounds))[1]
        upper = None if hi == math.inf else max(int(hi) - 1, 0)
        self.loop_bounds[var] = SizeVar(var.name, upper=upper, lower=0)

    # the kernel ----------------------------------------------------------------
    def begin(self) -> None:
        p = self.program
        self.slot = {b: k for k, b in enumerate(p.params)}
        for b in p.params:
            if b.dtype not in GLSL_TYPES:
                self.refuse(f"dtype {b.dtype}", f"buffer {b.name} is {b.dtype} (supported: {', '.join(GLSL_TYPES)})")
        for b in p.params:
            hi = bounds(b.numel())[1]
            if hi >= INT32:
                self.refuse("buffer may exceed 2^31 elements",
                            f"buffer {b.name} has up to {hi} elements under the size bounds; 32-bit indexing needs "
                            f"fewer than 2^31 (bound the size variables with SizeVar(name, upper=...))")
        self.r.used.update(f"b{k}" for k in range(len(p.params) + 1))   # the buffers' block names, the status block
        self.r.used.update(f"rxe_{h}" for h in (*HELPERS, *HELPER_OF, *HELPER_NAMES))
        for v in p.size_params:
            self.r.name(v, v.name)
        items = self.grid.items
        if bounds(items)[1] >= INT32:
            self.refuse("grid may exceed 2^31 invocations", f"the grid has up to {bounds(items)[1]} invocations")
        self.items_text = self.r.int_expr(items) if self.grid.loops else "1"
        self.line("uint gid = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x "
                  "* gl_WorkGroupSize.x")
        self.line("    + gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;")
        self.line("if (gid >= pc.items) return;")
        for k, v in enumerate(p.size_params):
            self.line(f"int {self.r.name(v, v.name)} = pc.size[{k}];")
        loops = self.grid.loops
        for var, extent in loops:
            self.bind(var, extent)
        self.grid_variables("gid")
        self.scope.extend(var for var, _ in loops)

    def grid_variables(self, rest: str) -> None:
        """Declares the grid loops' variables from the linear index `rest`
        (innermost loop fastest)."""
        for depth, (var, extent) in reversed(list(enumerate(self.grid.loops))):
            name = self.r.name(var, var.name)
            if depth == 0:
                self.line(f"int {name} = int({rest});")
            else:
                e = self.r.int_expr(extent)
                self.line(f"int {name} = int({rest} % uint({e}));")
                self.temps.append(object())   # kept alive: names are keyed by id()
                quotient = self.r.name(self.temps[-1], "rest")
                self.line(f"uint {quotient} = {rest} / uint({e});")
                rest = quotient

    def end(self):
        p = self.program
        status = bool(self.asserts)
        nb, ns = len(p.params) + (1 if status else 0), len(p.size_params)
        words = 2 + nb + ns
        loaded = _Loaded()
        loaded.visit(self.grid.body)
        head = ["#version 450", f"// {p.name}: {len(self.grid.loops)} grid loop(s), items = {self.items_text}",
                f"layout(local_size_x = {self.local_size_x}, local_size_x_id = 0) in;", ""]
        inputs = set(p.inputs)
        alias = "" if self.inplace else "restrict "
        for k, b in enumerate(p.params):
            access = "readonly " if b in inputs else "writeonly " if b in p.outputs and b not in loaded.buffers else ""
            if b.dtype in PACKED and b not in inputs:
                access = ""   # stored through atomics
            head.append(f"layout(std430, set = 0, binding = {k}) {alias}{access}buffer B{k} "
                        f"{{ {GLSL_TYPES[b.dtype]} v[]; }} b{k};  // {b.name}")
        if status:
            k = len(p.params)
            head.append(f"layout(std430, set = 0, binding = {k}) buffer B{k} {{ uint v[]; }} b{k};  "
                        "// status of the asserts")
        members = ["uint groups_x;", "uint items;", f"uint off[{nb}];"] + ([f"int size[{ns}];"] if ns else [])
        block = "layout(push_constant, std430) uniform" if words <= PUSH_CONSTANT_WORDS else \
            f"layout(std430, set = 0, binding = {nb}) readonly buffer"
        head.append(f"{block} PC {{ {' '.join(members)} }} pc;")
        head.append("")
        head += list(self.helpers.values())
        text = "\n".join(head) + "\nvoid main() {\n" + "\n".join(self.lines) + "\n}\n"
        c = CRenderer()
        for v in p.size_params:
            c.name(v, v.name)
        record = KernelRecord(
            name=p.name, num_buffers=nb, push_words=words, local_size_x=self.local_size_x, shared_bytes=0,
            flags=self.flags, items=self.grid.items, items_c=c.int_expr(self.grid.items),
            size_params=tuple(c.name(v, v.name) for v in p.size_params),
            grid=tuple(v.name for v, _ in self.grid.loops), push_in_buffer=words > PUSH_CONSTANT_WORDS,
            asserts=self.asserts, status=status, stored=self.stored)
        return text, record

    # statements ------------------------------------------------------------
    def visit_Store(self, s: Store):
        b = s.buffer
        if b.dtype == "int64" and b not in self.locals:
            r = self.r.data_range(s.value)
            if r is None or r[0] < -DATA64 or r[1] >= DATA64:
                self.refuse("int64 store may exceed 2^30",
                            f"the value stored to int64 buffer {b.name} lies in {r}, not proven inside "
                            f"[-2^30, 2^30) (every int64 in device memory must)")
            old = self.stored.get(b.name, r)
            self.stored[b.name] = (min(old[0], r[0]), max(old[1], r[1]))
            value = self.r.expr(s.value)
            low = self.element(b, s.indices)
            self.braced("{", f"int {self.temp('v64')} = {value};",
                        lambda: self.line(f"{low} = {self.last}; {low[:-1]} + 1u] = {self.last} >> 31;"))
            return
        if b.dtype == "float64" and b not in self.locals:
            value = self.r.expr(s.value)
            low = self.element(b, s.indices)
            self.braced("{", f"uvec2 {self.temp('w64')} = unpackDouble2x32({value});",
                        lambda: self.line(f"{low} = {self.last}.x; {low[:-1]} + 1u] = {self.last}.y;"))
            return
        if b.dtype in PACKED and b not in self.locals:
            # the value first: in place, the atomicAnd below clears the bits the value may read
            value = self.r.expr(s.value)
            word, shift = self.byte_address(b, s.indices)
            mask = (1 << PACKED[b.dtype]) - 1
            if b.dtype in NARROW_FLOATS:
                bits = self.r.float_bits(value, b.dtype)
            else:
                bits = f"{value} ? 1u : 0u" if b.dtype == "bool" else f"uint({value}) & {mask:#x}u"
            self.braced("{", f"uint {self.temp('bits')} = {bits};", lambda: self.lines_packed(word, shift, mask))
            return
        value = self.r.expr(s.value, b.dtype in ("int64", *NARROW))   # int64, narrow locals keep their low bits
        if b.dtype in NARROW:
            value = narrow(value, b.dtype)
        elif b.dtype in NARROW_FLOATS:   # a local array of float16 / bfloat16 holds the rounded values
            value = self.r.narrow_float(value, b.dtype)
        self.line(f"{self.element(b, s.indices)} = {value};")

    def temp(self, hint: str) -> str:
        """A fresh local name (kept in self.last)."""
        self.temps.append(object())   # kept alive: names are keyed by id()
        self.last = self.r.name(self.temps[-1], hint)
        return self.last

    def lines_packed(self, word: str, shift: str, mask: int) -> None:
        bits = self.last
        sh = self.temp("sh")
        self.line(f"uint {sh} = {shift};")
        self.line(f"atomicAnd({word}, ~({mask:#x}u << {sh}));")
        self.line(f"atomicOr({word}, {bits} << {sh});")

    def visit_IfThenElse(self, s: IfThenElse):
        self.branch(s, f"if ({self.r.expr(s.cond)}) {{", "} else {", "}")

    def braced(self, opening: str, first: str | None, emit_body) -> None:
        """`opening` (ending in `{`), then `first` and what emit_body() emits one level deeper, then `}`."""
        self.line(opening)
        self.depth += 1
        if first is not None:
            self.line(first)
        emit_body()
        self.depth -= 1
        self.line("}")

    def visit_Let(self, s: Let):
        t = self.r.value_type(s.var.dtype)
        if s.var.dtype == "int64":
            self.refuse("int64 scalar", f"int64 scalar {s.var.name} (only index arithmetic is int64)")
        value = narrow(self.r.expr(s.value, True), s.var.dtype) if s.var.dtype in NARROW else self.r.expr(s.value)
        self.braced("{", f"{t} {self.r.name(s.var, s.var.name)} = {value};",
                    lambda: self.scoped(s.var, s.body))

    def visit_Allocate(self, s: Allocate):
        b = s.buffer
        t = self.r.value_type(b.dtype)
        n, width = int(b.numel()), 8 if b.dtype == "float64" else 4
        if n * width > LOCAL_BYTES:
            self.refuse("local array too large", f"local buffer {b.name} has {n} elements "
                        f"({n * width} bytes; at most {LOCAL_BYTES} bytes per invocation)")
        self.locals.add(b)
        self.braced("{", f"{t} {self.r.name(b, b.name)}[{n}];", lambda: self.visit(s.body))

    def visit_Assert(self, s: Assert):
        k = len(self.asserts)
        pieces = s.message.replace("%", "%%").split("{}")
        marks = ["%d" if i < STATUS_VALUES else "?" for i in range(len(pieces) - 1)]
        self.asserts.append(f"{self.program.name}: " + "".join(a + b for a, b in zip(pieces, marks + [""])))
        word = f"b{len(self.program.params)}.v[pc.off[{len(self.program.params)}]"
        self.line(f"if (!{self.r.expr(s.cond)}) {{  // assert: {s.message.replace(chr(10), ' ')}")
        self.depth += 1
        self.line(f"atomicOr({word}], {1 << min(k, 31)}u);")
        self.line(f"if (atomicCompSwap({word} + 1u], 0u, 1u) == 0u) {{")
        self.depth += 1
        self.line(f"{word} + 2u] = {k}u;")
        for i, v in enumerate(s.values[:STATUS_VALUES]):
            self.line(f"{word} + {3 + i}u] = uint(int({self.r.expr(v)}));")
        self.depth -= 1
        self.line("}")
        self.line("return;")
        self.depth -= 1
        self.line("}")

    # loops ------------------------------------------------------------
    def serial_loop(self, s: For):
        v = self.r.name(s.var, s.var.name)
        self.bind(s.var, s.extent)
        self.braced(f"for (int {v} = 0; {v} < {self.r.int_expr(s.extent)}; ++{v}) {{", None,
                    lambda: self.scoped(s.var, s.body))

    def unrolled_loop(self, s: For):
        self.serial_loop(s)   # GLSL has no portable unroll pragma; the driver decides

    def vector_loop(self, s: For, lanes: int, stores: tuple):
        self.serial_loop(s)   # scalar code in this version (vec4 operations come later)

    def parallel_loop(self, s: For):
        self.serial_loop(s)   # not reached: self.task is always set (the grid is decided by grid.py)


def emit_glsl(program: TensorProgram, local_size_x: int = 64, *, inplace: bool = True, ranges: dict | None = None):
    """(GLSL 450 compute shader text, KernelRecord) for `program` (the ABI in
    the module docstring). `local_size_x` is the default of specialization
    constant 0; `inplace=False` promises that no output aliases an input (the
    buffers are then declared restrict). `ranges` (int64 buffer name -> (lo,
    hi)) narrows what a load of that buffer may hold below [-2^30, 2^30)
    (module.py knows it from the weights and the kernels that stored the
    values); the record's `stored` says what each int64 store wrote. Raises
    GlslUnsupported naming any construct not handled yet."""
    if isinstance(local_size_x, bool) or not isinstance(local_size_x, int) or not 1 <= local_size_x <= 1024:
        raise RelaxEdgeError(f"GLSL kernel {program.name}: local_size_x must be an integer in [1, 1024], "
                             f"got {local_size_x!r}")
    from .reduce import cooperative  # its emitter extends GlslKernel (int64 loads there keep the default range)
    return cooperative(program, local_size_x, inplace) or GlslKernel(program, local_size_x, inplace, ranges).emit()

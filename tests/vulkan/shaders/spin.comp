#version 450
// A long bounded loop: size[0] steps of an integer hash (a multiply-add and a xor-shift, no closed form
// for the compiler to find) in every invocation, a dispatch that outlasts a tiny fence timeout. Many
// invocations rather than more steps: llvmpipe (lavapipe) ends any loop after 65535 iterations.
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) writeonly buffer B0 { uint v[]; } b0;
layout(push_constant, std430) uniform PC { uint groups_x; uint items; uint off[1]; int size[1]; } pc;

void main() {
  uint gid = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x * gl_WorkGroupSize.x
             + gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (gid >= pc.items) return;
  uint h = gid + 1u;
  for (int i = 0; i < pc.size[0]; ++i) {
    h = h * 1664525u + 1013904223u;
    h ^= h >> 15;
  }
  b0.v[pc.off[0] + gid] = h;
}

#version 450
// out[i] = x[i] + size[i % 40]: 2 + 2 + 40 = 44 words, past 128 bytes, so the block is a buffer at binding 2.
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;
layout(std430, set = 0, binding = 1) writeonly buffer B1 { float v[]; } b1;
layout(std430, set = 0, binding = 2) readonly buffer P { uint groups_x; uint items; uint off[2]; int size[40]; } pc;

void main() {
  uint gid = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x * gl_WorkGroupSize.x
             + gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (gid >= pc.items) return;
  b1.v[pc.off[1] + gid] = b0.v[pc.off[0] + gid] + float(pc.size[gid % 40u]);
}

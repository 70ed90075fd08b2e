#version 450
// out = 2 * x + y over items elements (3 buffers, size[0] = n): the plain elementwise shape.
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;
layout(std430, set = 0, binding = 1) readonly buffer B1 { float v[]; } b1;
layout(std430, set = 0, binding = 2) writeonly buffer B2 { float v[]; } b2;
layout(push_constant, std430) uniform PC { uint groups_x; uint items; uint off[3]; int size[1]; } pc;

void main() {
  uint gid = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x * gl_WorkGroupSize.x
             + gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (gid >= pc.items) return;
  b2.v[pc.off[2] + gid] = 2.0 * b0.v[pc.off[0] + gid] + b1.v[pc.off[1] + gid];
}

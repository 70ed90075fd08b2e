#version 450
// A long bounded loop (size[0] steps of a float recurrence): a dispatch that outlasts a tiny fence timeout.
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) writeonly buffer B0 { float v[]; } b0;
layout(push_constant, std430) uniform PC { uint groups_x; uint items; uint off[1]; int size[1]; } pc;

void main() {
  uint gid = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x * gl_WorkGroupSize.x
             + gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  if (gid >= pc.items) return;
  float x = float(gid);
  for (int i = 0; i < pc.size[0]; ++i) x = x * 0.9999999 + 1.0;
  b0.v[pc.off[0] + gid] = x;
}

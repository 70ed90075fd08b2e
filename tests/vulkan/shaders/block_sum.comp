#version 450
// out[g] = the sum of x over workgroup g's invocations, in shared memory with barriers (a power-of-two
// local size). The body is guarded, not returned from, so every invocation reaches each barrier.
layout(local_size_x_id = 0) in;
layout(std430, set = 0, binding = 0) readonly buffer B0 { float v[]; } b0;
layout(std430, set = 0, binding = 1) writeonly buffer B1 { float v[]; } b1;
layout(push_constant, std430) uniform PC { uint groups_x; uint items; uint off[2]; } pc;
shared float partial[gl_WorkGroupSize.x];

void main() {
  uint group = (gl_WorkGroupID.y + gl_WorkGroupID.z * gl_NumWorkGroups.y) * pc.groups_x + gl_WorkGroupID.x;
  uint gid = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  uint lid = gl_LocalInvocationID.x;
  partial[lid] = gid < pc.items ? b0.v[pc.off[0] + gid] : 0.0;
  barrier();
  for (uint half_ = gl_WorkGroupSize.x / 2u; half_ > 0u; half_ /= 2u) {
    if (lid < half_) partial[lid] += partial[lid + half_];
    barrier();
  }
  if (lid == 0u && gid < pc.items) b1.v[pc.off[1] + group] = partial[0];
}

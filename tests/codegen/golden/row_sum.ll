define i32 @"row_sum_k_sum"(ptr noalias %"x0", ptr noalias %"sum", i64 %"m", i64 %"n", ptr %"err") nounwind
{
entry:
  %"task" = alloca {ptr, ptr, i64, i64, ptr, i32, i8}
  %"sum_acc" = alloca float, i32 1
  %"sum_acc_lanes" = alloca float, i32 4
  br label %"start"
start:
  %".7" = mul nsw i64 2, %"m"
  %".8" = mul nsw i64 %"m", %"n"
  %".9" = add nsw i64 %".7", %".8"
  %".10" = icmp sgt i64 %".9", 32768
  br i1 %".10", label %"start.if", label %"start.else"
start.if:
  %".12" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 0
  store ptr %"x0", ptr %".12"
  %".14" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 1
  store ptr %"sum", ptr %".14"
  %".16" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 2
  store i64 %"m", ptr %".16"
  %".18" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 3
  store i64 %"n", ptr %".18"
  %".20" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 4
  store ptr %"err", ptr %".20"
  %".22" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 5
  store i32 0, ptr %".22"
  %".24" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 6
  store i8 0, ptr %".24"
  call void @"rxe_threads_parallel_for"(i64 %"m", void (ptr, i64, i64, i32)* @"row_sum_k_sum.par1", {ptr, ptr, i64, i64, ptr, i32, i8}* %"task")
  %".27" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 6
  %".28" = load i8, ptr %".27"
  %".29" = icmp ne i8 %".28", 0
  br i1 %".29", label %"start.if.if", label %"start.if.endif", !prof !0
start.else:
  br label %"i0.head"
start.endif:
  ret i32 0
start.if.if:
  %".31" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 5
  %".32" = load i32, ptr %".31"
  ret i32 %".32"
start.if.endif:
  br label %"start.endif"
i0.head:
  %"i0" = phi  i64 [0, %"start.else"], [%".110", %"r1_r.done"]
  %".36" = icmp slt i64 %"i0", %"m"
  br i1 %".36", label %"i0.body", label %"i0.done"
i0.body:
  %".38" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float              0x0, float* %".38", align 4
  %".40" = insertelement <4 x float> <float undef, float undef, float undef, float undef>, float              0x0, i32 0
  %".41" = shufflevector <4 x float> %".40", <4 x float> <float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 0, i32 0, i32 0>
  %".42" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  store <4 x float> %".41", ptr %".42", align 4
  %".44" = sdiv i64 %"n", 4
  br label %"r1_o.head"
i0.done:
  br label %"start.endif"
r1_o.head:
  %"r1_o" = phi  i64 [0, %"i0.body"], [%".58", %"r1_o.body"]
  %".46" = icmp slt i64 %"r1_o", %".44"
  br i1 %".46", label %"r1_o.body", label %"r1_o.done"
r1_o.body:
  %".48" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  %".49" = load <4 x float>, float* %".48", align 4
  %".50" = mul nsw i64 %"i0", %"n"
  %".51" = mul nsw i64 4, %"r1_o"
  %".52" = add nsw i64 %".50", %".51"
  %".53" = getelementptr inbounds float, ptr %"x0", i64 %".52"
  %".54" = load <4 x float>, ptr %".53", align 4
  %".55" = fadd <4 x float> %".49", %".54"
  %".56" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  store <4 x float> %".55", ptr %".56", align 4
  %".58" = add nuw nsw i64 %"r1_o", 1
  br label %"r1_o.head"
r1_o.done:
  %".60" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".61" = load float, float* %".60", align 4
  %".62" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  %".63" = load float, float* %".62", align 4
  %".64" = fadd float %".61", %".63"
  %".65" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".64", float* %".65", align 4
  %".67" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".68" = load float, float* %".67", align 4
  %".69" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 1
  %".70" = load float, float* %".69", align 4
  %".71" = fadd float %".68", %".70"
  %".72" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".71", float* %".72", align 4
  %".74" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".75" = load float, float* %".74", align 4
  %".76" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 2
  %".77" = load float, float* %".76", align 4
  %".78" = fadd float %".75", %".77"
  %".79" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".78", float* %".79", align 4
  %".81" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".82" = load float, float* %".81", align 4
  %".83" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 3
  %".84" = load float, float* %".83", align 4
  %".85" = fadd float %".82", %".84"
  %".86" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".85", float* %".86", align 4
  %".88" = srem i64 %"n", 4
  br label %"r1_r.head"
r1_r.head:
  %"r1_r" = phi  i64 [0, %"r1_o.done"], [%".104", %"r1_r.body"]
  %".90" = icmp slt i64 %"r1_r", %".88"
  br i1 %".90", label %"r1_r.body", label %"r1_r.done"
r1_r.body:
  %".92" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".93" = load float, float* %".92", align 4
  %".94" = mul nsw i64 %"i0", %"n"
  %".95" = add nsw i64 %".94", %"r1_r"
  %".96" = sdiv i64 %"n", 4
  %".97" = mul nsw i64 4, %".96"
  %".98" = add nsw i64 %".95", %".97"
  %".99" = getelementptr inbounds float, ptr %"x0", i64 %".98"
  %".100" = load float, ptr %".99", align 4
  %".101" = fadd float %".93", %".100"
  %".102" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".101", float* %".102", align 4
  %".104" = add nuw nsw i64 %"r1_r", 1
  br label %"r1_r.head"
r1_r.done:
  %".106" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".107" = load float, float* %".106", align 4
  %".108" = getelementptr inbounds float, ptr %"sum", i64 %"i0"
  store float %".107", ptr %".108", align 4
  %".110" = add nuw nsw i64 %"i0", 1
  br label %"i0.head"
}

define void @"row_sum_k_sum.par1"(ptr %".1", i64 %".2", i64 %".3", i32 %".4") nounwind
{
entry:
  %".6" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 0
  %".7" = load ptr, ptr %".6"
  %".8" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 1
  %".9" = load ptr, ptr %".8"
  %".10" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 2
  %".11" = load i64, ptr %".10"
  %".12" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 3
  %".13" = load i64, ptr %".12"
  %".14" = getelementptr inbounds {ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 4
  %".15" = load ptr, ptr %".14"
  %"sum_acc" = alloca float, i32 1
  %"sum_acc_lanes" = alloca float, i32 4
  br label %"start"
start:
  br label %"i0.head"
i0.head:
  %"i0" = phi  i64 [%".2", %"start"], [%".92", %"r1_r.done"]
  %".18" = icmp slt i64 %"i0", %".3"
  br i1 %".18", label %"i0.body", label %"i0.done"
i0.body:
  %".20" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float              0x0, float* %".20", align 4
  %".22" = insertelement <4 x float> <float undef, float undef, float undef, float undef>, float              0x0, i32 0
  %".23" = shufflevector <4 x float> %".22", <4 x float> <float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 0, i32 0, i32 0>
  %".24" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  store <4 x float> %".23", ptr %".24", align 4
  %".26" = sdiv i64 %".13", 4
  br label %"r1_o.head"
i0.done:
  ret void
r1_o.head:
  %"r1_o" = phi  i64 [0, %"i0.body"], [%".40", %"r1_o.body"]
  %".28" = icmp slt i64 %"r1_o", %".26"
  br i1 %".28", label %"r1_o.body", label %"r1_o.done"
r1_o.body:
  %".30" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  %".31" = load <4 x float>, float* %".30", align 4
  %".32" = mul nsw i64 %"i0", %".13"
  %".33" = mul nsw i64 4, %"r1_o"
  %".34" = add nsw i64 %".32", %".33"
  %".35" = getelementptr inbounds float, ptr %".7", i64 %".34"
  %".36" = load <4 x float>, ptr %".35", align 4
  %".37" = fadd <4 x float> %".31", %".36"
  %".38" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  store <4 x float> %".37", ptr %".38", align 4
  %".40" = add nuw nsw i64 %"r1_o", 1
  br label %"r1_o.head"
r1_o.done:
  %".42" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".43" = load float, float* %".42", align 4
  %".44" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 0
  %".45" = load float, float* %".44", align 4
  %".46" = fadd float %".43", %".45"
  %".47" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".46", float* %".47", align 4
  %".49" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".50" = load float, float* %".49", align 4
  %".51" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 1
  %".52" = load float, float* %".51", align 4
  %".53" = fadd float %".50", %".52"
  %".54" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".53", float* %".54", align 4
  %".56" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".57" = load float, float* %".56", align 4
  %".58" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 2
  %".59" = load float, float* %".58", align 4
  %".60" = fadd float %".57", %".59"
  %".61" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".60", float* %".61", align 4
  %".63" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".64" = load float, float* %".63", align 4
  %".65" = getelementptr inbounds float, float* %"sum_acc_lanes", i64 3
  %".66" = load float, float* %".65", align 4
  %".67" = fadd float %".64", %".66"
  %".68" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".67", float* %".68", align 4
  %".70" = srem i64 %".13", 4
  br label %"r1_r.head"
r1_r.head:
  %"r1_r" = phi  i64 [0, %"r1_o.done"], [%".86", %"r1_r.body"]
  %".72" = icmp slt i64 %"r1_r", %".70"
  br i1 %".72", label %"r1_r.body", label %"r1_r.done"
r1_r.body:
  %".74" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".75" = load float, float* %".74", align 4
  %".76" = mul nsw i64 %"i0", %".13"
  %".77" = add nsw i64 %".76", %"r1_r"
  %".78" = sdiv i64 %".13", 4
  %".79" = mul nsw i64 4, %".78"
  %".80" = add nsw i64 %".77", %".79"
  %".81" = getelementptr inbounds float, ptr %".7", i64 %".80"
  %".82" = load float, ptr %".81", align 4
  %".83" = fadd float %".75", %".82"
  %".84" = getelementptr inbounds float, float* %"sum_acc", i64 0
  store float %".83", float* %".84", align 4
  %".86" = add nuw nsw i64 %"r1_r", 1
  br label %"r1_r.head"
r1_r.done:
  %".88" = getelementptr inbounds float, float* %"sum_acc", i64 0
  %".89" = load float, float* %".88", align 4
  %".90" = getelementptr inbounds float, ptr %".9", i64 %"i0"
  store float %".89", ptr %".90", align 4
  %".92" = add nuw nsw i64 %"i0", 1
  br label %"i0.head"
}

declare void @"rxe_threads_parallel_for"(i64 %".1", ptr %".2", ptr %".3")

!0 = !{ !"branch_weights", i32 1, i32 99 }

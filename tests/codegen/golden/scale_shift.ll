define i32 @"scale_shift_k_fused_multiply_add"(ptr noalias %"x0", ptr noalias %"x1", ptr noalias %"x2", ptr noalias %"add", i64 %"m", i64 %"n", ptr %"err") nounwind
{
entry:
  %"task" = alloca {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}
  br label %"start"
start:
  %".9" = mul nsw i64 %"m", %"n"
  %".10" = icmp sgt i64 %".9", 32768
  br i1 %".10", label %"start.if", label %"start.else"
start.if:
  %".12" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 0
  store ptr %"x0", ptr %".12"
  %".14" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 1
  store ptr %"x1", ptr %".14"
  %".16" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 2
  store ptr %"x2", ptr %".16"
  %".18" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 3
  store ptr %"add", ptr %".18"
  %".20" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 4
  store i64 %"m", ptr %".20"
  %".22" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 5
  store i64 %"n", ptr %".22"
  %".24" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 6
  store ptr %"err", ptr %".24"
  %".26" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 7
  store i32 0, ptr %".26"
  %".28" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 8
  store i8 0, ptr %".28"
  call void @"rxe_threads_parallel_for"(i64 %"m", void (ptr, i64, i64, i32)* @"scale_shift_k_fused_multiply_add.par1", {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task")
  %".31" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 8
  %".32" = load i8, ptr %".31"
  %".33" = icmp ne i8 %".32", 0
  br i1 %".33", label %"start.if.if", label %"start.if.endif", !prof !0
start.else:
  br label %"i0.head"
start.endif:
  ret i32 0
start.if.if:
  %".35" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}* %"task", i32 0, i32 7
  %".36" = load i32, ptr %".35"
  ret i32 %".36"
start.if.endif:
  br label %"start.endif"
i0.head:
  %"i0" = phi  i64 [0, %"start.else"], [%".98", %"i1_r.done"]
  %".40" = icmp slt i64 %"i0", %"m"
  br i1 %".40", label %"i0.body", label %"i0.done"
i0.body:
  %".42" = sdiv i64 %"n", 4
  br label %"i1_o.head"
i0.done:
  br label %"start.endif"
i1_o.head:
  %"i1_o" = phi  i64 [0, %"i0.body"], [%".64", %"i1_o.body"]
  %".44" = icmp slt i64 %"i1_o", %".42"
  br i1 %".44", label %"i1_o.body", label %"i1_o.done"
i1_o.body:
  %".46" = mul nsw i64 %"i0", %"n"
  %".47" = mul nsw i64 4, %"i1_o"
  %".48" = add nsw i64 %".46", %".47"
  %".49" = getelementptr inbounds float, ptr %"x0", i64 %".48"
  %".50" = load <4 x float>, ptr %".49", align 4
  %".51" = mul nsw i64 4, %"i1_o"
  %".52" = getelementptr inbounds float, ptr %"x1", i64 %".51"
  %".53" = load <4 x float>, ptr %".52", align 4
  %".54" = fmul <4 x float> %".50", %".53"
  %".55" = mul nsw i64 4, %"i1_o"
  %".56" = getelementptr inbounds float, ptr %"x2", i64 %".55"
  %".57" = load <4 x float>, ptr %".56", align 4
  %".58" = fadd <4 x float> %".54", %".57"
  %".59" = mul nsw i64 %"i0", %"n"
  %".60" = mul nsw i64 4, %"i1_o"
  %".61" = add nsw i64 %".59", %".60"
  %".62" = getelementptr inbounds float, ptr %"add", i64 %".61"
  store <4 x float> %".58", ptr %".62", align 4
  %".64" = add nuw nsw i64 %"i1_o", 1
  br label %"i1_o.head"
i1_o.done:
  %".66" = srem i64 %"n", 4
  br label %"i1_r.head"
i1_r.head:
  %"i1_r" = phi  i64 [0, %"i1_o.done"], [%".96", %"i1_r.body"]
  %".68" = icmp slt i64 %"i1_r", %".66"
  br i1 %".68", label %"i1_r.body", label %"i1_r.done"
i1_r.body:
  %".70" = mul nsw i64 %"i0", %"n"
  %".71" = add nsw i64 %".70", %"i1_r"
  %".72" = sdiv i64 %"n", 4
  %".73" = mul nsw i64 4, %".72"
  %".74" = add nsw i64 %".71", %".73"
  %".75" = getelementptr inbounds float, ptr %"x0", i64 %".74"
  %".76" = load float, ptr %".75", align 4
  %".77" = sdiv i64 %"n", 4
  %".78" = mul nsw i64 4, %".77"
  %".79" = add nsw i64 %"i1_r", %".78"
  %".80" = getelementptr inbounds float, ptr %"x1", i64 %".79"
  %".81" = load float, ptr %".80", align 4
  %".82" = fmul float %".76", %".81"
  %".83" = sdiv i64 %"n", 4
  %".84" = mul nsw i64 4, %".83"
  %".85" = add nsw i64 %"i1_r", %".84"
  %".86" = getelementptr inbounds float, ptr %"x2", i64 %".85"
  %".87" = load float, ptr %".86", align 4
  %".88" = fadd float %".82", %".87"
  %".89" = mul nsw i64 %"i0", %"n"
  %".90" = add nsw i64 %".89", %"i1_r"
  %".91" = sdiv i64 %"n", 4
  %".92" = mul nsw i64 4, %".91"
  %".93" = add nsw i64 %".90", %".92"
  %".94" = getelementptr inbounds float, ptr %"add", i64 %".93"
  store float %".88", ptr %".94", align 4
  %".96" = add nuw nsw i64 %"i1_r", 1
  br label %"i1_r.head"
i1_r.done:
  %".98" = add nuw nsw i64 %"i0", 1
  br label %"i0.head"
}

define void @"scale_shift_k_fused_multiply_add.par1"(ptr %".1", i64 %".2", i64 %".3", i32 %".4") nounwind
{
entry:
  %".6" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 0
  %".7" = load ptr, ptr %".6"
  %".8" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 1
  %".9" = load ptr, ptr %".8"
  %".10" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 2
  %".11" = load ptr, ptr %".10"
  %".12" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 3
  %".13" = load ptr, ptr %".12"
  %".14" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 4
  %".15" = load i64, ptr %".14"
  %".16" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 5
  %".17" = load i64, ptr %".16"
  %".18" = getelementptr inbounds {ptr, ptr, ptr, ptr, i64, i64, ptr, i32, i8}, ptr %".1", i32 0, i32 6
  %".19" = load ptr, ptr %".18"
  br label %"start"
start:
  br label %"i0.head"
i0.head:
  %"i0" = phi  i64 [%".2", %"start"], [%".80", %"i1_r.done"]
  %".22" = icmp slt i64 %"i0", %".3"
  br i1 %".22", label %"i0.body", label %"i0.done"
i0.body:
  %".24" = sdiv i64 %".17", 4
  br label %"i1_o.head"
i0.done:
  ret void
i1_o.head:
  %"i1_o" = phi  i64 [0, %"i0.body"], [%".46", %"i1_o.body"]
  %".26" = icmp slt i64 %"i1_o", %".24"
  br i1 %".26", label %"i1_o.body", label %"i1_o.done"
i1_o.body:
  %".28" = mul nsw i64 %"i0", %".17"
  %".29" = mul nsw i64 4, %"i1_o"
  %".30" = add nsw i64 %".28", %".29"
  %".31" = getelementptr inbounds float, ptr %".7", i64 %".30"
  %".32" = load <4 x float>, ptr %".31", align 4
  %".33" = mul nsw i64 4, %"i1_o"
  %".34" = getelementptr inbounds float, ptr %".9", i64 %".33"
  %".35" = load <4 x float>, ptr %".34", align 4
  %".36" = fmul <4 x float> %".32", %".35"
  %".37" = mul nsw i64 4, %"i1_o"
  %".38" = getelementptr inbounds float, ptr %".11", i64 %".37"
  %".39" = load <4 x float>, ptr %".38", align 4
  %".40" = fadd <4 x float> %".36", %".39"
  %".41" = mul nsw i64 %"i0", %".17"
  %".42" = mul nsw i64 4, %"i1_o"
  %".43" = add nsw i64 %".41", %".42"
  %".44" = getelementptr inbounds float, ptr %".13", i64 %".43"
  store <4 x float> %".40", ptr %".44", align 4
  %".46" = add nuw nsw i64 %"i1_o", 1
  br label %"i1_o.head"
i1_o.done:
  %".48" = srem i64 %".17", 4
  br label %"i1_r.head"
i1_r.head:
  %"i1_r" = phi  i64 [0, %"i1_o.done"], [%".78", %"i1_r.body"]
  %".50" = icmp slt i64 %"i1_r", %".48"
  br i1 %".50", label %"i1_r.body", label %"i1_r.done"
i1_r.body:
  %".52" = mul nsw i64 %"i0", %".17"
  %".53" = add nsw i64 %".52", %"i1_r"
  %".54" = sdiv i64 %".17", 4
  %".55" = mul nsw i64 4, %".54"
  %".56" = add nsw i64 %".53", %".55"
  %".57" = getelementptr inbounds float, ptr %".7", i64 %".56"
  %".58" = load float, ptr %".57", align 4
  %".59" = sdiv i64 %".17", 4
  %".60" = mul nsw i64 4, %".59"
  %".61" = add nsw i64 %"i1_r", %".60"
  %".62" = getelementptr inbounds float, ptr %".9", i64 %".61"
  %".63" = load float, ptr %".62", align 4
  %".64" = fmul float %".58", %".63"
  %".65" = sdiv i64 %".17", 4
  %".66" = mul nsw i64 4, %".65"
  %".67" = add nsw i64 %"i1_r", %".66"
  %".68" = getelementptr inbounds float, ptr %".11", i64 %".67"
  %".69" = load float, ptr %".68", align 4
  %".70" = fadd float %".64", %".69"
  %".71" = mul nsw i64 %"i0", %".17"
  %".72" = add nsw i64 %".71", %"i1_r"
  %".73" = sdiv i64 %".17", 4
  %".74" = mul nsw i64 4, %".73"
  %".75" = add nsw i64 %".72", %".74"
  %".76" = getelementptr inbounds float, ptr %".13", i64 %".75"
  store float %".70", ptr %".76", align 4
  %".78" = add nuw nsw i64 %"i1_r", 1
  br label %"i1_r.head"
i1_r.done:
  %".80" = add nuw nsw i64 %"i0", 1
  br label %"i0.head"
}

declare void @"rxe_threads_parallel_for"(i64 %".1", ptr %".2", ptr %".3")

!0 = !{ !"branch_weights", i32 1, i32 99 }

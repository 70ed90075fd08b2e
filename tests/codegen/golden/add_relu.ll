define i32 @"add_relu_k_fused_add_relu"(ptr noalias %"x0", ptr noalias %"x1", ptr noalias %"relu", i64 %"n", ptr %"err") nounwind
{
entry:
  br label %"start"
start:
  %".7" = sdiv i64 %"n", 4
  br label %"i0_o.head"
i0_o.head:
  %"i0_o" = phi  i64 [0, %"start"], [%".25", %"i0_o.body"]
  %".9" = icmp slt i64 %"i0_o", %".7"
  br i1 %".9", label %"i0_o.body", label %"i0_o.done"
i0_o.body:
  %".11" = mul nsw i64 4, %"i0_o"
  %".12" = getelementptr inbounds float, ptr %"x0", i64 %".11"
  %".13" = load <4 x float>, ptr %".12", align 4
  %".14" = mul nsw i64 4, %"i0_o"
  %".15" = getelementptr inbounds float, ptr %"x1", i64 %".14"
  %".16" = load <4 x float>, ptr %".15", align 4
  %".17" = fadd <4 x float> %".13", %".16"
  %".18" = insertelement <4 x float> <float undef, float undef, float undef, float undef>, float              0x0, i32 0
  %".19" = shufflevector <4 x float> %".18", <4 x float> <float undef, float undef, float undef, float undef>, <4 x i32> <i32 0, i32 0, i32 0, i32 0>
  %".20" = fcmp ogt <4 x float> %".17", %".19"
  %".21" = select  <4 x i1> %".20", <4 x float> %".17", <4 x float> %".19"
  %".22" = mul nsw i64 4, %"i0_o"
  %".23" = getelementptr inbounds float, ptr %"relu", i64 %".22"
  store <4 x float> %".21", ptr %".23", align 4
  %".25" = add nuw nsw i64 %"i0_o", 1
  br label %"i0_o.head"
i0_o.done:
  %".27" = srem i64 %"n", 4
  br label %"i0_r.head"
i0_r.head:
  %"i0_r" = phi  i64 [0, %"i0_o.done"], [%".49", %"i0_r.body"]
  %".29" = icmp slt i64 %"i0_r", %".27"
  br i1 %".29", label %"i0_r.body", label %"i0_r.done"
i0_r.body:
  %".31" = sdiv i64 %"n", 4
  %".32" = mul nsw i64 4, %".31"
  %".33" = add nsw i64 %"i0_r", %".32"
  %".34" = getelementptr inbounds float, ptr %"x0", i64 %".33"
  %".35" = load float, ptr %".34", align 4
  %".36" = sdiv i64 %"n", 4
  %".37" = mul nsw i64 4, %".36"
  %".38" = add nsw i64 %"i0_r", %".37"
  %".39" = getelementptr inbounds float, ptr %"x1", i64 %".38"
  %".40" = load float, ptr %".39", align 4
  %".41" = fadd float %".35", %".40"
  %".42" = fcmp ogt float %".41",              0x0
  %".43" = select  i1 %".42", float %".41", float              0x0
  %".44" = sdiv i64 %"n", 4
  %".45" = mul nsw i64 4, %".44"
  %".46" = add nsw i64 %"i0_r", %".45"
  %".47" = getelementptr inbounds float, ptr %"relu", i64 %".46"
  store float %".43", ptr %".47", align 4
  %".49" = add nuw nsw i64 %"i0_r", 1
  br label %"i0_r.head"
i0_r.done:
  ret i32 0
}

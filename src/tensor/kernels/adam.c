/* Adam's update of one parameter in one pass: the optimizer graph's thirteen elementwise
 * operations per element, in the graph's order and each rounded to float as the graph's
 * kernels round it, so the result is the graph's bit for bit. */
#include <math.h>

#include "tensor/kernels/kernels.h"
#include "tensor/kernels/vec.h"

BBI_INLINE void adam4(const bbi_f32_adam_coef *k, bbi_f32x4 p, bbi_f32x4 g, bbi_f32x4 m, bbi_f32x4 v, bbi_f32x4 *po,
                      bbi_f32x4 *mo, bbi_f32x4 *vo) {
  const bbi_f32x4 mn = m * bbi_f32x4_splat(k->b1) + g * bbi_f32x4_splat(k->c1);
  const bbi_f32x4 vn = v * bbi_f32x4_splat(k->b2) + (g * g) * bbi_f32x4_splat(k->c2);
  const bbi_f32x4 d = bbi_f32x4_sqrt(vn) / bbi_f32x4_splat(k->s2) + bbi_f32x4_splat(k->eps);
  *po = p - bbi_f32x4_splat(k->a) * (mn / d);
  *mo = mn;
  *vo = vn;
}

void bbi_f32_adam(const bbi_f32_adam_coef *k, size_t n, const float *p, const float *g, const float *m, const float *v,
                  float *p_out, float *m_out, float *v_out) {
  size_t i = 0;
  bbi_f32x4 po, mo, vo;
  for (; i + 4 <= n; i += 4) {
    adam4(k, bbi_f32x4_load(p + i), bbi_f32x4_load(g + i), bbi_f32x4_load(m + i), bbi_f32x4_load(v + i), &po, &mo, &vo);
    bbi_f32x4_store(p_out + i, po);
    bbi_f32x4_store(m_out + i, mo);
    bbi_f32x4_store(v_out + i, vo);
  }
  if (i < n) {
    const size_t r = n - i;
    adam4(k, bbi_f32x4_load_tail(p + i, r), bbi_f32x4_load_tail(g + i, r), bbi_f32x4_load_tail(m + i, r),
          bbi_f32x4_load_tail(v + i, r), &po, &mo, &vo);
    bbi_f32x4_store_tail(p_out + i, po, r);
    bbi_f32x4_store_tail(m_out + i, mo, r);
    bbi_f32x4_store_tail(v_out + i, vo, r);
  }
}

void bbi_f32_adam_scalar(const bbi_f32_adam_coef *k, size_t n, const float *p, const float *g, const float *m,
                         const float *v, float *p_out, float *m_out, float *v_out) {
  for (size_t i = 0; i < n; i++) {
    const float mn = m[i] * k->b1 + g[i] * k->c1;
    const float vn = v[i] * k->b2 + (g[i] * g[i]) * k->c2;
    const float d = sqrtf(vn) / k->s2 + k->eps;
    p_out[i] = p[i] - k->a * (mn / d);
    m_out[i] = mn;
    v_out[i] = vn;
  }
}

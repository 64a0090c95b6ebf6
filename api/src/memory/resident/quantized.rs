//! 8-bit rows: a vector as integers with one scale, and the integer dot
//! product both the vector index's scan and its clusters' centres use.

/// `vector` scaled to unit length; `None` when it is all zeros.
pub fn unit(vector: &[f32]) -> Option<Vec<f32>> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm > f32::EPSILON).then(|| vector.iter().map(|x| x / norm).collect())
}

/// A vector as integers and the scale that maps them back.
pub fn quantize(vector: &[f32]) -> (Vec<i8>, f32) {
    let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
    if largest <= f32::EPSILON {
        return (vec![0; vector.len()], 0.0);
    }
    let scale = largest / 127.0;
    let rows = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (rows, scale)
}

/// Sixteen independent integer sums, so the compiler can use SIMD lanes.
#[inline(always)]
pub fn dot(a: &[i8], b: &[i16]) -> i32 {
    let mut sums = [0i32; 16];
    let (a_blocks, b_blocks) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: i32 = a_blocks
        .remainder()
        .iter()
        .zip(b_blocks.remainder())
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum();
    for (x, y) in a_blocks.zip(b_blocks) {
        for lane in 0..16 {
            sums[lane] += i32::from(x[lane]) * i32::from(y[lane]);
        }
    }
    sums.iter().sum::<i32>() + tail
}

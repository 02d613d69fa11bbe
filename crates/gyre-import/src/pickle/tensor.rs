//! Tensors read from dumps: an element type, a shape, and a strided view of little-endian
//! storage bytes (checked against the storage when built, so reading never goes out of bounds).

use std::sync::Arc;

/// The element types a dump's tensors may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `float64`.
    F64,
    /// `float32`.
    F32,
    /// `float16`.
    F16,
    /// `bfloat16`.
    Bf16,
    /// `int64`.
    I64,
    /// `int32`.
    I32,
    /// `int16`.
    I16,
    /// `int8`.
    I8,
    /// `uint8`.
    U8,
    /// `bool`.
    Bool,
}

impl Dtype {
    /// The type of a torch storage class name (`FloatStorage`).
    pub fn of_storage(name: &str) -> Option<Self> {
        Some(match name {
            "DoubleStorage" => Self::F64,
            "FloatStorage" => Self::F32,
            "HalfStorage" => Self::F16,
            "BFloat16Storage" => Self::Bf16,
            "LongStorage" => Self::I64,
            "IntStorage" => Self::I32,
            "ShortStorage" => Self::I16,
            "CharStorage" => Self::I8,
            "ByteStorage" => Self::U8,
            "BoolStorage" => Self::Bool,
            _ => return None,
        })
    }

    /// The type of a NumPy dtype name (`str(arr.dtype)`: `float32`).
    pub fn of_numpy(name: &str) -> Option<Self> {
        Some(match name {
            "float64" => Self::F64,
            "float32" => Self::F32,
            "float16" => Self::F16,
            "int64" => Self::I64,
            "int32" => Self::I32,
            "int16" => Self::I16,
            "int8" => Self::I8,
            "uint8" => Self::U8,
            "bool" => Self::Bool,
            _ => return None,
        })
    }

    /// Its name, as NumPy and torch spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::F64 => "float64",
            Self::F32 => "float32",
            Self::F16 => "float16",
            Self::Bf16 => "bfloat16",
            Self::I64 => "int64",
            Self::I32 => "int32",
            Self::I16 => "int16",
            Self::I8 => "int8",
            Self::U8 => "uint8",
            Self::Bool => "bool",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F64 | Self::I64 => 8,
            Self::F32 | Self::I32 => 4,
            Self::F16 | Self::Bf16 | Self::I16 => 2,
            Self::I8 | Self::U8 | Self::Bool => 1,
        }
    }

    /// Whether it is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, Self::F64 | Self::F32 | Self::F16 | Self::Bf16)
    }
}

/// A storage: its element type and bytes (shared by every tensor viewing it).
#[derive(Clone, Debug)]
pub struct Storage {
    /// Element type.
    pub dtype: Dtype,
    /// The bytes, little-endian.
    pub bytes: Arc<[u8]>,
}

impl Storage {
    /// Elements held.
    pub fn numel(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }
}

/// A tensor: a strided view of a storage.
#[derive(Clone, Debug)]
pub struct Tensor {
    /// Element type.
    pub dtype: Dtype,
    /// Shape.
    pub shape: Vec<usize>,
    strides: Vec<usize>,
    offset: usize,
    bytes: Arc<[u8]>,
}

impl Tensor {
    /// A view of `storage` at element `offset` with `size` and `stride`; refused when any
    /// element it names lies outside the storage (or the arithmetic overflows).
    pub fn view(
        storage: &Storage,
        offset: i64,
        size: &[i64],
        stride: &[i64],
    ) -> Result<Self, String> {
        if size.len() != stride.len() {
            return Err(format!(
                "a tensor of {} dimensions with {} strides",
                size.len(),
                stride.len()
            ));
        }
        let nonneg = |v: i64, what: &str| {
            usize::try_from(v).map_err(|_| format!("a tensor with a negative {what} ({v})"))
        };
        let offset = nonneg(offset, "storage offset")?;
        let shape: Vec<usize> = size
            .iter()
            .map(|s| nonneg(*s, "size"))
            .collect::<Result<_, _>>()?;
        let strides: Vec<usize> = stride
            .iter()
            .map(|s| nonneg(*s, "stride"))
            .collect::<Result<_, _>>()?;
        let empty = shape.contains(&0);
        if !empty {
            let mut last = offset;
            for (n, st) in shape.iter().zip(&strides) {
                last = (n - 1)
                    .checked_mul(*st)
                    .and_then(|x| x.checked_add(last))
                    .ok_or("a tensor whose strides overflow")?;
            }
            if last >= storage.numel() {
                return Err(format!(
                    "a tensor reaching element {last} of a storage of {}",
                    storage.numel()
                ));
            }
        }
        Ok(Self {
            dtype: storage.dtype,
            shape,
            strides,
            offset,
            bytes: storage.bytes.clone(),
        })
    }

    /// A contiguous tensor of `shape` over `bytes` (NumPy's `tobytes()`); the byte count must
    /// be exactly what the shape needs.
    pub fn contiguous(dtype: Dtype, shape: Vec<usize>, bytes: Vec<u8>) -> Result<Self, String> {
        let numel = shape
            .iter()
            .try_fold(1usize, |a, n| a.checked_mul(*n))
            .ok_or("a tensor shape that overflows")?;
        if numel.checked_mul(dtype.size()) != Some(bytes.len()) {
            return Err(format!(
                "{} bytes for a {} tensor of shape {shape:?}",
                bytes.len(),
                dtype.name()
            ));
        }
        let mut strides = vec![1; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        Ok(Self {
            dtype,
            shape,
            strides,
            offset: 0,
            bytes: bytes.into(),
        })
    }

    /// Elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Row `i` of a tensor of two or more dimensions.
    pub fn row(&self, i: usize) -> Option<Tensor> {
        if self.shape.len() < 2 || i >= self.shape[0] {
            return None;
        }
        Some(Tensor {
            dtype: self.dtype,
            shape: self.shape[1..].to_vec(),
            strides: self.strides[1..].to_vec(),
            offset: self.offset + i * self.strides[0],
            bytes: self.bytes.clone(),
        })
    }

    /// Element offsets in row-major order.
    fn offsets(&self) -> Vec<usize> {
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return out;
        }
        let mut index = vec![0usize; self.shape.len()];
        for _ in 0..n {
            out.push(
                self.offset
                    + index
                        .iter()
                        .zip(&self.strides)
                        .map(|(i, s)| i * s)
                        .sum::<usize>(),
            );
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < self.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        out
    }

    fn raw(&self, at: usize) -> &[u8] {
        let size = self.dtype.size();
        &self.bytes[at * size..(at + 1) * size]
    }

    /// The elements of an integer or bool tensor, row-major.
    pub fn ints(&self) -> Result<Vec<i64>, String> {
        if self.dtype.is_float() {
            return Err(format!("is a {} tensor, not integers", self.dtype.name()));
        }
        Ok(self
            .offsets()
            .into_iter()
            .map(|at| {
                let b = self.raw(at);
                match self.dtype {
                    Dtype::I64 => i64::from_le_bytes(arr(b)),
                    Dtype::I32 => i64::from(i32::from_le_bytes(arr(b))),
                    Dtype::I16 => i64::from(i16::from_le_bytes(arr(b))),
                    Dtype::I8 => i64::from(b[0] as i8),
                    _ => i64::from(b[0]),
                }
            })
            .collect())
    }

    /// The elements as floats, row-major.
    pub fn floats(&self) -> Vec<f64> {
        self.offsets()
            .into_iter()
            .map(|at| {
                let b = self.raw(at);
                match self.dtype {
                    Dtype::F64 => f64::from_le_bytes(arr(b)),
                    Dtype::F32 => f64::from(f32::from_le_bytes(arr(b))),
                    Dtype::F16 => f16_to_f64(u16::from_le_bytes(arr(b))),
                    Dtype::Bf16 => {
                        f64::from(f32::from_bits(u32::from(u16::from_le_bytes(arr(b))) << 16))
                    }
                    Dtype::I64 => i64::from_le_bytes(arr(b)) as f64,
                    Dtype::I32 => f64::from(i32::from_le_bytes(arr(b))),
                    Dtype::I16 => f64::from(i16::from_le_bytes(arr(b))),
                    Dtype::I8 => f64::from(b[0] as i8),
                    Dtype::U8 | Dtype::Bool => f64::from(b[0]),
                }
            })
            .collect()
    }
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&b[..N]);
    out
}

/// IEEE half precision to double (subnormals, infinities and NaN included).
fn f16_to_f64(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    sign * match exp {
        0 => frac * 2f64.powi(-24),
        31 if frac == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage(dtype: Dtype, bytes: Vec<u8>) -> Storage {
        Storage {
            dtype,
            bytes: bytes.into(),
        }
    }

    #[test]
    fn views_are_bounded_by_their_storage() {
        let s = storage(
            Dtype::I32,
            [1i32, 2, 3, 4]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        );
        let t = Tensor::view(&s, 1, &[3], &[1]).unwrap();
        assert_eq!(t.ints().unwrap(), [2, 3, 4]);
        let col = Tensor::view(&s, 0, &[2, 2], &[1, 2]).unwrap();
        assert_eq!(col.ints().unwrap(), [1, 3, 2, 4]);
        assert_eq!(col.row(1).unwrap().ints().unwrap(), [2, 4]);
        assert!(
            Tensor::view(&s, 2, &[3], &[1])
                .unwrap_err()
                .contains("element 4 of a storage of 4")
        );
        assert!(Tensor::view(&s, 0, &[2], &[i64::MAX]).is_err());
        assert!(Tensor::view(&s, -1, &[1], &[1]).is_err());
        assert_eq!(Tensor::view(&s, 9, &[0], &[1]).unwrap().numel(), 0);
    }

    #[test]
    fn halves_decode() {
        assert_eq!(f16_to_f64(0x3c00), 1.0);
        assert_eq!(f16_to_f64(0xc000), -2.0);
        assert_eq!(f16_to_f64(0x0001), 2f64.powi(-24));
        assert!(f16_to_f64(0x7e00).is_nan());
        let bf =
            Tensor::contiguous(Dtype::Bf16, vec![1], 0xbf80u16.to_le_bytes().to_vec()).unwrap();
        assert_eq!(bf.floats(), [-1.0]);
    }

    #[test]
    fn contiguous_needs_exact_bytes() {
        assert!(Tensor::contiguous(Dtype::F32, vec![2, 2], vec![0; 15]).is_err());
        assert!(Tensor::contiguous(Dtype::F32, vec![usize::MAX, 2], vec![]).is_err());
        let t = Tensor::contiguous(
            Dtype::I64,
            vec![2, 1],
            [5i64, 6].iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
        .unwrap();
        assert_eq!(t.row(1).unwrap().ints().unwrap(), [6]);
    }
}

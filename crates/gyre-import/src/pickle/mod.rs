//! A strict pickle reader for trainer dumps: torch `.pt` archives ([`pt`]) and SkyRL's pickled
//! batches. It runs only the opcodes of protocols 2 to 5 that such files use and knows only the
//! globals listed in [`Global`]; any other opcode or global is an error naming it, so nothing is
//! ever called or guessed. Objects live in one arena addressed by [`Id`]: the memo, shared
//! references and containers filled after they were memoised (what the pickler writes) all see
//! one object, and no operation recurses over the input's nesting (only [`Pickle::to_json`]
//! walks it, to a fixed depth).

pub mod pt;
pub mod tensor;

use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

pub use tensor::{Dtype, Tensor};

/// Limits a hostile input cannot get past.
pub mod limits {
    /// Objects one pickle may build (each opcode builds at most one; a rollout dump of 16 M
    /// tokens, log-probs and mask values as Python lists is about 50 M).
    pub const OBJECTS: usize = 100_000_000;
    /// Nested `MARK`s open at once (real dumps nest a handful).
    pub const MARKS: usize = 256;
    /// Depth [`Pickle::to_json`](super::Pickle::to_json) descends before it writes a
    /// placeholder.
    pub const JSON_DEPTH: usize = 32;
    /// Bytes of one pickle (a `.pt`'s `data.pkl`, or a whole SkyRL `.pkl`).
    pub const PICKLE_BYTES: u64 = 4 << 30;
    /// Bytes of the tensor storages of one `.pt` archive, together.
    pub const STORAGE_BYTES: u64 = 8 << 30;
}

/// An object of the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Id(u32);

/// The callables and classes a dump may name. Anything else is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Global {
    /// `torch._utils._rebuild_tensor_v2`: a tensor over a storage.
    RebuildTensorV2,
    /// `collections.OrderedDict` (a tensor's empty backward hooks).
    OrderedDict,
    /// `torch.<Type>Storage`: a storage class, naming its element type.
    Storage(Dtype),
    /// `torch.device`.
    Device,
    /// `builtins.set` / `builtins.frozenset` (protocol 2 writes sets as calls).
    Set,
    /// `_codecs.encode` (protocol 2 writes `bytes` as a latin-1 string and this call).
    Encode,
    /// SkyRL's `training_batch._rebuild_tensor_batch(cls, state)`.
    RebuildTensorBatch,
    /// SkyRL's `TrainingInputBatch` class.
    TrainingInputBatch,
}

impl Global {
    fn resolve(module: &str, name: &str) -> Result<Self, String> {
        const SKYRL: [&str; 2] = [
            "skyrl.backends.skyrl_train.training_batch",
            "skyrl_train.training_batch",
        ];
        Ok(match (module, name) {
            ("torch._utils", "_rebuild_tensor_v2") => Self::RebuildTensorV2,
            ("collections", "OrderedDict") => Self::OrderedDict,
            ("torch", "device") => Self::Device,
            ("builtins" | "__builtin__", "set" | "frozenset") => Self::Set,
            ("_codecs", "encode") => Self::Encode,
            (m, "_rebuild_tensor_batch") if SKYRL.contains(&m) => Self::RebuildTensorBatch,
            (m, "TrainingInputBatch") if SKYRL.contains(&m) => Self::TrainingInputBatch,
            ("torch", storage) if storage.ends_with("Storage") => {
                match Dtype::of_storage(storage) {
                    Some(dtype) => Self::Storage(dtype),
                    None => {
                        return Err(format!(
                            "unknown tensor dtype: storage type torch.{storage}"
                        ));
                    }
                }
            }
            _ => return Err(format!("unknown pickle global `{module}.{name}`")),
        })
    }
}

/// One object.
#[derive(Clone, Debug)]
pub enum Node {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An integer (wider ones are refused).
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// `bytes` or `bytearray`.
    Bytes(Vec<u8>),
    /// A list.
    List(Vec<Id>),
    /// A tuple.
    Tuple(Vec<Id>),
    /// A dict, in insertion order (a repeated key keeps its last value, as Python does).
    Dict(Vec<(Id, Id)>),
    /// A set or frozenset.
    Set(Vec<Id>),
    /// A global named by the pickle (a class or callable not yet called).
    Global(Global),
    /// A storage handed out by the archive (see [`Persistent`]).
    Storage(tensor::Storage),
    /// A tensor.
    Tensor(Tensor),
    /// A `torch.device`, as its type (`cpu`, `cuda`).
    Device(String),
    /// An object rebuilt by SkyRL's `_rebuild_tensor_batch`: its class and pickled state.
    Batch {
        /// The class.
        class: Global,
        /// Its `__getstate__` dict.
        state: Id,
    },
}

impl Node {
    /// What the object is, in Python's words (for messages).
    pub fn kind(&self) -> &'static str {
        match self {
            Node::None => "None",
            Node::Bool(_) => "bool",
            Node::Int(_) => "int",
            Node::Float(_) => "float",
            Node::Str(_) => "str",
            Node::Bytes(_) => "bytes",
            Node::List(_) => "list",
            Node::Tuple(_) => "tuple",
            Node::Dict(_) => "dict",
            Node::Set(_) => "set",
            Node::Global(_) => "class",
            Node::Storage(_) => "storage",
            Node::Tensor(_) => "tensor",
            Node::Device(_) => "device",
            Node::Batch { .. } => "TrainingInputBatch",
        }
    }
}

/// A pickle that could not be read: what was met, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct PickleError {
    /// Byte offset of the opcode at fault.
    pub offset: usize,
    /// What it met.
    pub what: String,
}

impl fmt::Display for PickleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pickle byte {})", self.what, self.offset)
    }
}

impl std::error::Error for PickleError {}

/// Resolves persistent ids (`BINPERSID`): a `.pt` archive hands out its storages; a plain
/// pickle has none.
pub trait Persistent {
    /// The object persistent id `pid` stands for.
    fn load(&mut self, pickle: &Pickle, pid: Id) -> Result<Node, String>;
}

/// A plain pickle: any persistent id is an error.
pub struct NoPersistent;

impl Persistent for NoPersistent {
    fn load(&mut self, _: &Pickle, _: Id) -> Result<Node, String> {
        Err("a persistent id in a plain pickle (only torch archives hold storages)".into())
    }
}

/// A read pickle: the arena and its root object.
#[derive(Debug)]
pub struct Pickle {
    nodes: Vec<Node>,
    root: Id,
}

impl Pickle {
    /// Reads `data`, resolving persistent ids through `persistent`.
    pub fn read(data: &[u8], persistent: &mut dyn Persistent) -> Result<Self, PickleError> {
        let mut vm = Vm {
            data,
            pos: 0,
            p: Pickle {
                nodes: Vec::new(),
                root: Id(0),
            },
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
        };
        loop {
            let at = vm.pos;
            match vm.step(persistent) {
                Ok(true) => return Ok(vm.p),
                Ok(false) => {}
                Err(what) => return Err(PickleError { offset: at, what }),
            }
        }
    }

    /// The object the pickle stands for.
    pub fn root(&self) -> Id {
        self.root
    }

    /// The object `id`.
    pub fn node(&self, id: Id) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// The value of string key `key` in dict `id` (the last one, as Python keeps).
    pub fn get(&self, id: Id, key: &str) -> Option<Id> {
        match self.node(id) {
            Node::Dict(items) => items
                .iter()
                .rev()
                .find(|(k, _)| matches!(self.node(*k), Node::Str(s) if s == key))
                .map(|(_, v)| *v),
            _ => None,
        }
    }

    /// The string keys of dict `id`, in order.
    pub fn keys(&self, id: Id) -> Vec<&str> {
        match self.node(id) {
            Node::Dict(items) => items
                .iter()
                .filter_map(|(k, _)| match self.node(*k) {
                    Node::Str(s) => Some(s.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The items of list or tuple `id`.
    pub fn items(&self, id: Id) -> Option<&[Id]> {
        match self.node(id) {
            Node::List(v) | Node::Tuple(v) => Some(v),
            _ => None,
        }
    }

    /// Integer `id` (a `bool` is one, as in Python; so is a one-element integer tensor).
    pub fn int(&self, id: Id) -> Option<i64> {
        match self.node(id) {
            Node::Int(i) => Some(*i),
            Node::Bool(b) => Some(i64::from(*b)),
            Node::Tensor(t) if t.numel() == 1 => t.ints().ok().and_then(|v| v.first().copied()),
            _ => None,
        }
    }

    /// Number `id` as a float (ints and one-element tensors too).
    pub fn float(&self, id: Id) -> Option<f64> {
        match self.node(id) {
            Node::Float(f) => Some(*f),
            Node::Int(i) => Some(*i as f64),
            Node::Bool(b) => Some(f64::from(u8::from(*b))),
            Node::Tensor(t) if t.numel() == 1 => t.floats().first().copied(),
            _ => None,
        }
    }

    /// String `id`.
    pub fn str(&self, id: Id) -> Option<&str> {
        match self.node(id) {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Integers of a list/tuple of ints or of an integer tensor (flattened).
    pub fn ints(&self, id: Id) -> Result<Vec<i64>, String> {
        match self.node(id) {
            Node::Tensor(t) => t.ints(),
            Node::List(v) | Node::Tuple(v) => v
                .iter()
                .enumerate()
                .map(|(i, x)| match self.node(*x) {
                    Node::Int(n) => Ok(*n),
                    Node::Bool(b) => Ok(i64::from(*b)),
                    other => Err(format!("[{i}] is {}, not an int", other.kind())),
                })
                .collect(),
            other => Err(format!(
                "is {}, not a list of ints or a tensor",
                other.kind()
            )),
        }
    }

    /// Numbers of a list/tuple of numbers or of a tensor (flattened), as floats.
    pub fn floats(&self, id: Id) -> Result<Vec<f64>, String> {
        match self.node(id) {
            Node::Tensor(t) => Ok(t.floats()),
            Node::List(v) | Node::Tuple(v) => v
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    self.float(*x)
                        .ok_or_else(|| format!("[{i}] is {}, not a number", self.node(*x).kind()))
                })
                .collect(),
            other => Err(format!(
                "is {}, not a list of numbers or a tensor",
                other.kind()
            )),
        }
    }

    /// Object `id` as JSON, for metadata worth keeping: tensors and bytes as a short
    /// description, non-finite floats as strings, and anything nested deeper than
    /// [`limits::JSON_DEPTH`] as `"…"`.
    pub fn to_json(&self, id: Id) -> Value {
        self.json_at(id, 0)
    }

    fn json_at(&self, id: Id, depth: usize) -> Value {
        if depth >= limits::JSON_DEPTH {
            return Value::String("…".into());
        }
        let list = |v: &[Id]| Value::Array(v.iter().map(|x| self.json_at(*x, depth + 1)).collect());
        match self.node(id) {
            Node::None => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(i) => Value::from(*i),
            Node::Float(f) => serde_json::Number::from_f64(*f)
                .map_or_else(|| Value::String(f.to_string()), Value::Number),
            Node::Str(s) => Value::String(s.clone()),
            Node::Bytes(b) => Value::String(format!("<{} bytes>", b.len())),
            Node::List(v) | Node::Tuple(v) | Node::Set(v) => list(v),
            Node::Dict(items) => {
                let mut m = Map::new();
                for (k, v) in items {
                    let key = match self.node(*k) {
                        Node::Str(s) => s.clone(),
                        Node::Int(i) => i.to_string(),
                        other => format!("<{}>", other.kind()),
                    };
                    m.insert(key, self.json_at(*v, depth + 1));
                }
                Value::Object(m)
            }
            Node::Tensor(t) if t.numel() == 1 => {
                let f = t.floats()[0];
                if t.dtype.is_float() {
                    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
                } else {
                    Value::from(f as i64)
                }
            }
            Node::Tensor(t) => Value::String(format!("<tensor {} {:?}>", t.dtype.name(), t.shape)),
            other => Value::String(format!("<{}>", other.kind())),
        }
    }
}

struct Vm<'a> {
    data: &'a [u8],
    pos: usize,
    p: Pickle,
    stack: Vec<Id>,
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
}

impl Vm<'_> {
    fn take(&mut self, n: u64) -> Result<&[u8], String> {
        let left = (self.data.len() - self.pos) as u64;
        if n > left {
            return Err(format!(
                "truncated: an argument of {n} bytes, {left} left in the pickle"
            ));
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.data[start..self.pos])
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn le<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    fn line(&mut self) -> Result<String, String> {
        let rest = &self.data[self.pos..];
        let end = memchr::memchr(b'\n', rest).ok_or("truncated: a line without its end")?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|_| "a global name that is not UTF-8".to_string())?
            .to_owned();
        self.pos += end + 1;
        Ok(s)
    }

    fn alloc(&mut self, node: Node) -> Result<Id, String> {
        if self.p.nodes.len() >= limits::OBJECTS {
            return Err(format!(
                "more than {} objects in one pickle",
                limits::OBJECTS
            ));
        }
        let id = Id(self.p.nodes.len() as u32);
        self.p.nodes.push(node);
        Ok(id)
    }

    fn push(&mut self, node: Node) -> Result<(), String> {
        let id = self.alloc(node)?;
        self.stack.push(id);
        Ok(())
    }

    fn pop(&mut self) -> Result<Id, String> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err("stack underflow".into());
        }
        self.stack.pop().ok_or_else(|| "stack underflow".into())
    }

    fn top(&self) -> Result<Id, String> {
        self.stack
            .last()
            .copied()
            .ok_or_else(|| "stack underflow".into())
    }

    fn pop_mark(&mut self) -> Result<Vec<Id>, String> {
        let mark = self.marks.pop().ok_or("no MARK to pop to")?;
        Ok(self.stack.split_off(mark))
    }

    fn node_mut(&mut self, id: Id) -> &mut Node {
        &mut self.p.nodes[id.0 as usize]
    }

    fn int_le(bytes: &[u8]) -> Result<i64, String> {
        if bytes.len() > 8 {
            return Err(format!(
                "an integer of {} bytes (wider than 64 bits)",
                bytes.len()
            ));
        }
        let mut buf = if bytes.last().is_some_and(|b| b & 0x80 != 0) {
            [0xff; 8]
        } else {
            [0; 8]
        };
        buf[..bytes.len()].copy_from_slice(bytes);
        Ok(i64::from_le_bytes(buf))
    }

    fn string(bytes: &[u8]) -> Result<Node, String> {
        std::str::from_utf8(bytes)
            .map(|s| Node::Str(s.to_owned()))
            .map_err(|_| "a string that is not UTF-8".to_string())
    }

    fn extend(&mut self, target: Id, items: Vec<Id>, op: &str) -> Result<(), String> {
        match self.node_mut(target) {
            Node::List(v) | Node::Set(v) => {
                v.extend(items);
                Ok(())
            }
            other => Err(format!("{op} on a {}", other.kind())),
        }
    }

    fn set_items(&mut self, target: Id, items: Vec<Id>) -> Result<(), String> {
        if items.len() % 2 != 0 {
            return Err("SETITEMS with an odd number of items".into());
        }
        match self.node_mut(target) {
            Node::Dict(d) => {
                d.extend(items.chunks_exact(2).map(|kv| (kv[0], kv[1])));
                Ok(())
            }
            other => Err(format!("SETITEM on a {}", other.kind())),
        }
    }

    fn put(&mut self, index: u32) -> Result<(), String> {
        let top = self.top()?;
        self.memo.insert(index, top);
        Ok(())
    }

    fn get(&mut self, index: u32) -> Result<(), String> {
        let id = *self
            .memo
            .get(&index)
            .ok_or_else(|| format!("memo entry {index} read before it was written"))?;
        self.stack.push(id);
        Ok(())
    }

    /// Runs one opcode; `true` at `STOP`.
    fn step(&mut self, persistent: &mut dyn Persistent) -> Result<bool, String> {
        let op = self
            .u8()
            .map_err(|_| "truncated: the pickle ends before STOP".to_string())?;
        match op {
            0x80 => {
                let proto = self.u8()?;
                if !(2..=5).contains(&proto) {
                    return Err(format!("pickle protocol {proto} (2 to 5 are read)"));
                }
            }
            0x95 => {
                self.le::<8>()?;
            }
            b'.' => {
                let root = self.pop()?;
                self.p.root = root;
                return Ok(true);
            }
            b'(' => {
                if self.marks.len() >= limits::MARKS {
                    return Err(format!("more than {} nested MARKs", limits::MARKS));
                }
                self.marks.push(self.stack.len());
            }
            b'0' => {
                if self.marks.last() == Some(&self.stack.len()) {
                    self.marks.pop();
                } else {
                    self.pop()?;
                }
            }
            b'1' => {
                self.pop_mark()?;
            }
            b'2' => {
                let top = self.top()?;
                self.stack.push(top);
            }
            b'J' => {
                let v = i32::from_le_bytes(self.le()?);
                self.push(Node::Int(i64::from(v)))?;
            }
            b'K' => {
                let v = self.u8()?;
                self.push(Node::Int(i64::from(v)))?;
            }
            b'M' => {
                let v = u16::from_le_bytes(self.le()?);
                self.push(Node::Int(i64::from(v)))?;
            }
            0x8a => {
                let n = self.u8()?;
                let v = Self::int_le(self.take(u64::from(n))?)?;
                self.push(Node::Int(v))?;
            }
            0x8b => {
                let n = u32::from_le_bytes(self.le()?);
                if n > 8 {
                    return Err(format!("an integer of {n} bytes (wider than 64 bits)"));
                }
                let v = Self::int_le(self.take(u64::from(n))?)?;
                self.push(Node::Int(v))?;
            }
            b'N' => self.push(Node::None)?,
            0x88 => self.push(Node::Bool(true))?,
            0x89 => self.push(Node::Bool(false))?,
            b'G' => {
                let v = f64::from_be_bytes(self.le()?);
                self.push(Node::Float(v))?;
            }
            b'X' | 0x8c | 0x8d => {
                let n = match op {
                    b'X' => u64::from(u32::from_le_bytes(self.le()?)),
                    0x8c => u64::from(self.u8()?),
                    _ => u64::from_le_bytes(self.le()?),
                };
                let node = Self::string(self.take(n)?)?;
                self.push(node)?;
            }
            b'B' | b'C' | 0x8e | 0x96 => {
                let n = match op {
                    b'B' => u64::from(u32::from_le_bytes(self.le()?)),
                    b'C' => u64::from(self.u8()?),
                    _ => u64::from_le_bytes(self.le()?),
                };
                let bytes = self.take(n)?.to_vec();
                self.push(Node::Bytes(bytes))?;
            }
            b']' => self.push(Node::List(Vec::new()))?,
            b')' => self.push(Node::Tuple(Vec::new()))?,
            b'}' => self.push(Node::Dict(Vec::new()))?,
            0x8f => self.push(Node::Set(Vec::new()))?,
            b'a' => {
                let v = self.pop()?;
                let list = self.top()?;
                self.extend(list, vec![v], "APPEND")?;
            }
            b'e' | 0x90 => {
                let items = self.pop_mark()?;
                let target = self.top()?;
                self.extend(
                    target,
                    items,
                    if op == b'e' { "APPENDS" } else { "ADDITEMS" },
                )?;
            }
            b'l' => {
                let items = self.pop_mark()?;
                self.push(Node::List(items))?;
            }
            b't' => {
                let items = self.pop_mark()?;
                self.push(Node::Tuple(items))?;
            }
            0x91 => {
                let items = self.pop_mark()?;
                self.push(Node::Set(items))?;
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.pop()?);
                }
                items.reverse();
                self.push(Node::Tuple(items))?;
            }
            b'd' => {
                let items = self.pop_mark()?;
                let id = self.alloc(Node::Dict(Vec::new()))?;
                self.set_items(id, items)?;
                self.stack.push(id);
            }
            b's' => {
                let v = self.pop()?;
                let k = self.pop()?;
                let dict = self.top()?;
                self.set_items(dict, vec![k, v])?;
            }
            b'u' => {
                let items = self.pop_mark()?;
                let dict = self.top()?;
                self.set_items(dict, items)?;
            }
            b'c' => {
                let module = self.line()?;
                let name = self.line()?;
                let g = Global::resolve(&module, &name)?;
                self.push(Node::Global(g))?;
            }
            0x93 => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Some(module), Some(name)) = (self.p.str(module), self.p.str(name)) else {
                    return Err("STACK_GLOBAL of something other than two strings".into());
                };
                let g = Global::resolve(module, name)?;
                self.push(Node::Global(g))?;
            }
            b'R' => {
                let args = self.pop()?;
                let callable = self.pop()?;
                let node = self.call(callable, args)?;
                self.push(node)?;
            }
            b'Q' => {
                let pid = self.pop()?;
                let node = persistent.load(&self.p, pid)?;
                self.push(node)?;
            }
            b'h' => {
                let i = self.u8()?;
                self.get(u32::from(i))?;
            }
            b'j' => {
                let i = u32::from_le_bytes(self.le()?);
                self.get(i)?;
            }
            b'q' => {
                let i = self.u8()?;
                self.put(u32::from(i))?;
            }
            b'r' => {
                let i = u32::from_le_bytes(self.le()?);
                self.put(i)?;
            }
            0x94 => {
                let i = u32::try_from(self.memo.len()).map_err(|_| "memo overflow")?;
                self.put(i)?;
            }
            b'b' => {
                let _state = self.pop()?;
                let target = self.top()?;
                return Err(format!(
                    "BUILD on a {} (no object in these dumps is built from state)",
                    self.p.node(target).kind()
                ));
            }
            0x81 | 0x92 => {
                return Err(format!(
                    "opcode NEWOBJ{} (no object in these dumps is made that way)",
                    if op == 0x92 { "_EX" } else { "" }
                ));
            }
            other => {
                return Err(format!(
                    "pickle opcode 0x{other:02x} ({}), which trainer dumps do not use",
                    opcode_name(other)
                ));
            }
        }
        Ok(false)
    }

    /// `REDUCE`: calls one of the known globals.
    fn call(&mut self, callable: Id, args: Id) -> Result<Node, String> {
        let Node::Global(g) = *self.p.node(callable) else {
            return Err(format!("REDUCE calls a {}", self.p.node(callable).kind()));
        };
        let args: Vec<Id> = match self.p.node(args) {
            Node::Tuple(v) => v.clone(),
            other => return Err(format!("REDUCE with {} arguments", other.kind())),
        };
        let p = &self.p;
        match g {
            Global::RebuildTensorV2 => {
                if !(6..=7).contains(&args.len()) {
                    return Err(format!("_rebuild_tensor_v2 with {} arguments", args.len()));
                }
                let Node::Storage(storage) = p.node(args[0]) else {
                    return Err(format!(
                        "_rebuild_tensor_v2 of a {}",
                        p.node(args[0]).kind()
                    ));
                };
                let offset = p
                    .int(args[1])
                    .ok_or("_rebuild_tensor_v2: offset is not an int")?;
                let size = p
                    .ints(args[2])
                    .map_err(|e| format!("_rebuild_tensor_v2 size {e}"))?;
                let stride = p
                    .ints(args[3])
                    .map_err(|e| format!("_rebuild_tensor_v2 stride {e}"))?;
                Tensor::view(storage, offset, &size, &stride).map(Node::Tensor)
            }
            Global::OrderedDict => match args.as_slice() {
                [] => Ok(Node::Dict(Vec::new())),
                _ => Err("OrderedDict with arguments (tensors' hooks are empty)".into()),
            },
            Global::Device => match args.first().and_then(|a| p.str(*a)) {
                Some(kind) => Ok(Node::Device(kind.to_owned())),
                None => Err("torch.device without a device type".into()),
            },
            Global::Set => match args.as_slice() {
                [] => Ok(Node::Set(Vec::new())),
                [items] => p
                    .items(*items)
                    .map(|v| Node::Set(v.to_vec()))
                    .ok_or_else(|| "set of something other than a list".into()),
                _ => Err("set with several arguments".into()),
            },
            Global::Encode => match args.as_slice() {
                [s, enc] if p.str(*enc) == Some("latin1") => {
                    let s = p.str(*s).ok_or("_codecs.encode of a non-string")?;
                    s.chars()
                        .map(|c| {
                            u8::try_from(u32::from(c))
                                .map_err(|_| "latin-1 out of range".to_string())
                        })
                        .collect::<Result<Vec<u8>, String>>()
                        .map(Node::Bytes)
                }
                _ => Err("_codecs.encode other than latin1".into()),
            },
            Global::RebuildTensorBatch => match args.as_slice() {
                [class, state] => match p.node(*class) {
                    Node::Global(c @ Global::TrainingInputBatch) => Ok(Node::Batch {
                        class: *c,
                        state: *state,
                    }),
                    other => Err(format!("_rebuild_tensor_batch of a {}", other.kind())),
                },
                _ => Err("_rebuild_tensor_batch without (class, state)".into()),
            },
            Global::Storage(_) | Global::TrainingInputBatch => {
                Err(format!("a call of {g:?}, which is only ever an argument"))
            }
        }
    }
}

fn opcode_name(op: u8) -> &'static str {
    match op {
        b'I' => "INT, protocol 0",
        b'L' => "LONG, protocol 0",
        b'F' => "FLOAT, protocol 0",
        b'S' => "STRING, protocol 0",
        b'V' => "UNICODE, protocol 0",
        b'P' => "PERSID, protocol 0",
        b'g' | b'p' => "GET/PUT, protocol 0",
        b'T' | b'U' => "BINSTRING, Python 2",
        b'i' | b'o' => "INST/OBJ, protocol 0",
        0x82..=0x84 => "EXT",
        0x97 | 0x98 => "out-of-band buffer",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests;

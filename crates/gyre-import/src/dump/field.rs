//! Reading a dump's pickled objects by field path: every value read knows where it was
//! (`samples[3].loss_masks`), so a wrong type is reported at its field.

use crate::pickle::{Id, Node, Pickle, Tensor};

/// What is wrong, and the field it was met at.
pub type Fault = (String, String);

/// An object of a pickle, and the path it was reached by.
#[derive(Clone)]
pub struct Field<'a> {
    /// The pickle.
    pub p: &'a Pickle,
    /// The object.
    pub id: Id,
    /// Its path from the root (`samples[3].tokens`).
    pub path: String,
}

impl<'a> Field<'a> {
    /// The root object.
    pub fn root(p: &'a Pickle) -> Self {
        Self {
            p,
            id: p.root(),
            path: String::new(),
        }
    }

    /// A fault at this field.
    pub fn fault(&self, message: impl Into<String>) -> Fault {
        (message.into(), self.path.clone())
    }

    fn sub(&self, id: Id, part: &str) -> Self {
        let path = match (self.path.is_empty(), part.starts_with('[')) {
            (true, _) | (false, true) => format!("{}{part}", self.path),
            (false, false) => format!("{}.{part}", self.path),
        };
        Self {
            p: self.p,
            id,
            path,
        }
    }

    /// Whether the object is `None`.
    pub fn is_none(&self) -> bool {
        matches!(self.p.node(self.id), Node::None)
    }

    /// Key `key` of a dict, absent when missing or `None`.
    pub fn get(&self, key: &str) -> Option<Self> {
        let f = self.sub(self.p.get(self.id, key)?, key);
        (!f.is_none()).then_some(f)
    }

    /// Key `key` of a dict, which must be there.
    pub fn need(&self, key: &str) -> Result<Self, Fault> {
        if !matches!(self.p.node(self.id), Node::Dict(_)) {
            return Err(self.fault(format!("is {}, not a dict", self.p.node(self.id).kind())));
        }
        self.get(key)
            .ok_or_else(|| self.sub(self.id, key).fault("missing"))
    }

    /// The items of a list or tuple.
    pub fn items(&self) -> Result<Vec<Self>, Fault> {
        let items = self
            .p
            .items(self.id)
            .ok_or_else(|| self.fault(format!("is {}, not a list", self.p.node(self.id).kind())))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, id)| self.sub(*id, &format!("[{i}]")))
            .collect())
    }

    /// An integer.
    pub fn int(&self) -> Result<i64, Fault> {
        self.p
            .int(self.id)
            .ok_or_else(|| self.fault(format!("is {}, not an int", self.p.node(self.id).kind())))
    }

    /// A number.
    pub fn float(&self) -> Result<f64, Fault> {
        self.p
            .float(self.id)
            .ok_or_else(|| self.fault(format!("is {}, not a number", self.p.node(self.id).kind())))
    }

    /// A string.
    pub fn str(&self) -> Result<&'a str, Fault> {
        self.p
            .str(self.id)
            .ok_or_else(|| self.fault(format!("is {}, not a string", self.p.node(self.id).kind())))
    }

    /// Integers: a list of ints or an integer tensor.
    pub fn ints(&self) -> Result<Vec<i64>, Fault> {
        self.p.ints(self.id).map_err(|e| self.fault(e))
    }

    /// Numbers: a list of numbers or a tensor.
    pub fn floats(&self) -> Result<Vec<f64>, Fault> {
        self.p.floats(self.id).map_err(|e| self.fault(e))
    }

    /// A tensor.
    pub fn tensor(&self) -> Result<&'a Tensor, Fault> {
        match self.p.node(self.id) {
            Node::Tensor(t) => Ok(t),
            other => Err(self.fault(format!("is {}, not a tensor", other.kind()))),
        }
    }

    /// The object as JSON (see [`Pickle::to_json`]).
    pub fn json(&self) -> serde_json::Value {
        self.p.to_json(self.id)
    }
}

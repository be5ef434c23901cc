//! The small arithmetic a corpus entry writes its figures in, so that a
//! published figure stays exactly as published (`mean(5601, 5642, 5674) /
//! mean(6292, 6508)`, not a ratio someone rounded) and a simulated one says
//! which runs and metrics it reads (`after.ops_per_s / before.ops_per_s`).
//!
//! Grammar: numbers; `+ - * /` with the usual precedence; parentheses; unary
//! minus; `x` (the figure's point, on a curve); a bare name (a published
//! value: a number, a list, or a table by point); `run.metric` (a metric of a
//! run the entry defines); and the functions `mean`, `median`, `min`, `max`
//! over numbers and lists. A list is only an argument of a function.

use std::fmt;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A number.
    Num(f64),
    /// The point of a curve.
    X,
    /// A published value by name.
    Published(String),
    /// A run's metric.
    Metric {
        /// The run's name in the entry.
        run: String,
        /// The metric's name (a workload result or a metric of every run).
        metric: String,
    },
    /// A function of its arguments.
    Call(Func, Vec<Expr>),
    /// Unary minus.
    Neg(Box<Expr>),
    /// A binary operation.
    Bin(Op, Box<Expr>, Box<Expr>),
}

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

/// A function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    /// The arithmetic mean.
    Mean,
    /// The median (the mean of the middle two for an even count).
    Median,
    /// The smallest.
    Min,
    /// The largest.
    Max,
}

/// A value while evaluating: a number, or a list (a function's argument).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// One number.
    Num(f64),
    /// Numbers, as published (repeated runs).
    List(Vec<f64>),
}

/// What an expression's names mean where it is evaluated.
pub trait Scope {
    /// The published value `name` at the current point.
    fn published(&self, name: &str) -> Result<Value, String>;
    /// Metric `metric` of run `run` at the current point.
    fn metric(&self, run: &str, metric: &str) -> Result<f64, String>;
    /// The current point, if the figure has points.
    fn x(&self) -> Result<f64, String>;
}

impl Expr {
    /// Parses `text`; the error says where and what was expected.
    pub fn parse(text: &str) -> Result<Expr, String> {
        let mut p = Parser { s: text.as_bytes(), i: 0, text };
        let e = p.sum()?;
        p.ws();
        if p.i < p.s.len() {
            return Err(p.err("an operator or the end"));
        }
        Ok(e)
    }

    /// Evaluates to one number (a list is an error: say which function).
    pub fn eval(&self, scope: &dyn Scope) -> Result<f64, String> {
        match self.value(scope)? {
            Value::Num(v) => Ok(v),
            Value::List(_) => Err(format!("'{self}' is a list of figures: take mean(...) or median(...) of it")),
        }
    }

    fn value(&self, scope: &dyn Scope) -> Result<Value, String> {
        Ok(match self {
            Expr::Num(v) => Value::Num(*v),
            Expr::X => Value::Num(scope.x()?),
            Expr::Published(name) => scope.published(name)?,
            Expr::Metric { run, metric } => Value::Num(scope.metric(run, metric)?),
            Expr::Neg(e) => Value::Num(-e.eval(scope)?),
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(scope)?, b.eval(scope)?);
                Value::Num(match op {
                    Op::Add => a + b,
                    Op::Sub => a - b,
                    Op::Mul => a * b,
                    Op::Div => a / b,
                })
            }
            Expr::Call(f, args) => {
                let mut all = Vec::new();
                for a in args {
                    match a.value(scope)? {
                        Value::Num(v) => all.push(v),
                        Value::List(l) => all.extend(l),
                    }
                }
                if all.is_empty() {
                    return Err(format!("{f:?}() of nothing"));
                }
                Value::Num(f.apply(&mut all))
            }
        })
    }

    /// Every `run.metric` the expression reads, in order of appearance.
    pub fn metrics(&self) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Metric { run, metric } = e {
                out.push((run.as_str(), metric.as_str()));
            }
        });
        out
    }

    /// Every published name the expression reads.
    pub fn published_names(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Published(n) = e {
                out.push(n.as_str());
            }
        });
        out
    }

    /// Whether the expression reads the point `x`.
    pub fn uses_x(&self) -> bool {
        let mut any = false;
        self.walk(&mut |e| any |= *e == Expr::X);
        any
    }

    fn walk<'a>(&'a self, f: &mut impl FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Neg(e) => e.walk(f),
            Expr::Bin(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.walk(f)),
            _ => {}
        }
    }
}

impl Func {
    fn apply(self, v: &mut [f64]) -> f64 {
        match self {
            Func::Mean => v.iter().sum::<f64>() / v.len() as f64,
            Func::Min => v.iter().copied().fold(f64::INFINITY, f64::min),
            Func::Max => v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            Func::Median => {
                v.sort_by(f64::total_cmp);
                let n = v.len();
                if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                }
            }
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Num(v) => write!(f, "{v}"),
            Expr::X => write!(f, "x"),
            Expr::Published(n) => write!(f, "{n}"),
            Expr::Metric { run, metric } => write!(f, "{run}.{metric}"),
            Expr::Neg(e) => write!(f, "-{e}"),
            Expr::Bin(op, a, b) => {
                let o = match op {
                    Op::Add => "+",
                    Op::Sub => "-",
                    Op::Mul => "*",
                    Op::Div => "/",
                };
                write!(f, "({a} {o} {b})")
            }
            Expr::Call(func, args) => {
                let name = format!("{func:?}").to_lowercase();
                let args: Vec<String> = args.iter().map(ToString::to_string).collect();
                write!(f, "{name}({})", args.join(", "))
            }
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    fn err(&self, expected: &str) -> String {
        let found = self.text.get(self.i..).unwrap_or("").chars().next();
        let found = found.map_or("the end".to_string(), |c| format!("'{c}'"));
        format!("in '{}': expected {expected} at column {}, found {found}", self.text, self.i + 1)
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    /// One level of left-associative binary operators: operands parsed by
    /// `operand`, joined by any of `ops` (each operator's byte and operation).
    fn binary(&mut self, ops: [(u8, Op); 2], operand: fn(&mut Self) -> Result<Expr, String>) -> Result<Expr, String> {
        let mut e = operand(self)?;
        while let Some(&(_, op)) = ops.iter().find(|&&(c, _)| self.eat(c)) {
            e = Expr::Bin(op, Box::new(e), Box::new(operand(self)?));
        }
        Ok(e)
    }

    fn sum(&mut self) -> Result<Expr, String> {
        self.binary([(b'+', Op::Add), (b'-', Op::Sub)], Self::product)
    }

    fn product(&mut self) -> Result<Expr, String> {
        self.binary([(b'*', Op::Mul), (b'/', Op::Div)], Self::unary)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.eat(b'-') {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn ident(&mut self) -> Option<&str> {
        let start = self.i;
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') {
            self.i += 1;
        }
        (self.i > start).then(|| &self.text[start..self.i])
    }

    fn atom(&mut self) -> Result<Expr, String> {
        self.ws();
        if self.eat(b'(') {
            let e = self.sum()?;
            if !self.eat(b')') {
                return Err(self.err("')'"));
            }
            return Ok(e);
        }
        let start = self.i;
        match self.s.get(self.i) {
            Some(c) if c.is_ascii_digit() || *c == b'.' => {
                while self.s.get(self.i).is_some_and(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'_'))
                    || (matches!(self.s.get(self.i), Some(b'+' | b'-'))
                        && matches!(self.s.get(self.i - 1), Some(b'e' | b'E')))
                {
                    self.i += 1;
                }
                let t = self.text[start..self.i].replace('_', "");
                t.parse().map(Expr::Num).map_err(|_| {
                    self.i = start;
                    self.err("a number")
                })
            }
            Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
                let name = self.ident().unwrap_or_default().to_string();
                if self.s.get(self.i) == Some(&b'.') {
                    self.i += 1;
                    let Some(metric) = self.ident().map(str::to_string) else {
                        return Err(self.err("a metric's name after the run's"));
                    };
                    return Ok(Expr::Metric { run: name, metric });
                }
                let func = match name.as_str() {
                    "mean" => Some(Func::Mean),
                    "median" => Some(Func::Median),
                    "min" => Some(Func::Min),
                    "max" => Some(Func::Max),
                    _ => None,
                };
                if let Some(func) = func {
                    if !self.eat(b'(') {
                        return Err(self.err(&format!("'(' after {name}")));
                    }
                    let mut args = vec![self.sum()?];
                    while self.eat(b',') {
                        args.push(self.sum()?);
                    }
                    if !self.eat(b')') {
                        return Err(self.err("',' or ')'"));
                    }
                    return Ok(Expr::Call(func, args));
                }
                Ok(if name == "x" { Expr::X } else { Expr::Published(name) })
            }
            _ => Err(self.err("a number, a name, 'run.metric' or '('")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct S;
    impl Scope for S {
        fn published(&self, name: &str) -> Result<Value, String> {
            match name {
                "tip" => Ok(Value::List(vec![1.0, 2.0, 6.0])),
                "one" => Ok(Value::Num(4.0)),
                _ => Err(format!("no {name}")),
            }
        }
        fn metric(&self, run: &str, metric: &str) -> Result<f64, String> {
            match (run, metric) {
                ("after", "ops") => Ok(3.0),
                ("before", "ops") => Ok(2.0),
                _ => Err(format!("no {run}.{metric}")),
            }
        }
        fn x(&self) -> Result<f64, String> {
            Ok(8.0)
        }
    }

    fn eval(s: &str) -> Result<f64, String> {
        Expr::parse(s)?.eval(&S)
    }

    #[test]
    fn arithmetic_follows_precedence_and_reads_names() {
        assert_eq!(eval("1 + 2 * 3").unwrap(), 7.0);
        assert_eq!(eval("(1 + 2) * 3").unwrap(), 9.0);
        assert_eq!(eval("-x / 2 - -1").unwrap(), -3.0);
        assert_eq!(eval("after.ops / before.ops").unwrap(), 1.5);
        assert_eq!(eval("mean(tip) / one").unwrap(), 0.75);
        assert_eq!(eval("median(tip, 10, 20)").unwrap(), 6.0);
        assert_eq!(eval("max(1e3, 2_000) - min(tip)").unwrap(), 1999.0);
        assert_eq!(eval("1.5e-1 * 2").unwrap(), 0.3);
    }

    #[test]
    fn mistakes_say_where() {
        let e = Expr::parse("after.ops / ").unwrap_err();
        assert!(e.contains("column 13") && e.contains("expected a number"), "{e}");
        let e = Expr::parse("mean(1, 2").unwrap_err();
        assert!(e.contains("',' or ')'"), "{e}");
        let e = eval("tip / 2").unwrap_err();
        assert!(e.contains("mean(...)"), "{e}");
        assert!(eval("after.bogus").unwrap_err().contains("no after.bogus"));
    }

    #[test]
    fn names_are_listed_for_checking_before_any_run() {
        let e = Expr::parse("x / after.iter_ns + mean(tip) * before.iter_ns").unwrap();
        assert_eq!(e.metrics(), vec![("after", "iter_ns"), ("before", "iter_ns")]);
        assert_eq!(e.published_names(), vec!["tip"]);
        assert!(e.uses_x());
    }
}

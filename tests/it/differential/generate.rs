//! Random valid query documents over the read types, walked from the
//! served schema: whatever a root of [`READ_ROOTS`] reaches (descriptor
//! types, interfaces and unions included) may be selected, so a new field
//! is generated without an edit here. A document has aliases, named and
//! inline fragments (on objects, on `Node`, on the `Descriptor` union),
//! `__typename`, `@include` / `@skip` with literals and variables, and
//! arguments as literals or variables, now and then ones that fail (a bad
//! cursor, a size past the limit, an id of something deleted, hidden or
//! restricted) inside non-null fields.
//!
//! Documents stay within the server's depth and complexity limits, by the
//! same count of list sizes its cost check makes; one that still fails
//! validation is a bug of this generator, and the run says so with it.

use std::collections::HashMap;

use async_graphql::parser::types::Type;
use riverfeed::rng::Rng;
use serde_json::{Map, Value};

use super::fixture::{Fixture, VIEWERS};
use super::schema::{named, Field, Kind, Schema};
use super::values;

/// The roots the generator starts from: the read types.
pub const READ_ROOTS: &[&str] = &[
    "feed",
    "slice",
    "actorFeed",
    "groupFeed",
    "discussions",
    "aggregatedFeed",
    "notifications",
    "notificationCounts",
    "viewer",
    "node",
    "nodes",
    "action",
    "actions",
    "user",
    "webhooks",
    "webhook",
    "markers",
];

/// Deepest field nesting generated (the server accepts 16).
const MAX_DEPTH: usize = 8;
/// Most cost a document reaches by the server's count (it accepts 50,000).
const BUDGET: u64 = 20_000;
/// Most items a field's selection may be repeated for, lists within lists.
const MOST_REPEATS: u64 = 1_000;
/// The server's document limits (64 directives, 256 aliases, 3,000 fields
/// with fragments expanded), with room to spare; and a size that keeps a
/// document readable when it is printed with a failure.
const MOST_DIRECTIVES: usize = 48;
const MOST_ALIASES: usize = 200;
const MOST_FIELDS: usize = 120;

/// A generated document, its variables and the viewer it runs as (an
/// index of [`VIEWERS`]).
pub struct Generated {
    pub document: String,
    pub variables: Value,
    pub viewer: usize,
}

struct Fragment {
    name: String,
    on: String,
    /// Its cost per repeat of the place it is spread in.
    unit: u64,
    /// Fields deep below the place it is spread in.
    depth: usize,
    /// Fields it selects, its spreads expanded.
    fields: usize,
}

struct Gen<'a> {
    schema: &'a Schema,
    fx: &'a Fixture,
    rng: Rng,
    definitions: Vec<String>,
    variables: Map<String, Value>,
    fragments: Vec<Fragment>,
    fragment_texts: Vec<String>,
    /// Response keys written without an alias, and the field (type and
    /// arguments) each stands for: a key means one field in a document.
    keys: HashMap<String, String>,
    next: usize,
    cost: u64,
    deepest: usize,
    directives: usize,
    aliases: usize,
    fields: usize,
}

/// The `index`th document of the run seeded `seed`.
pub fn generate(schema: &Schema, fx: &Fixture, seed: u64, index: u64) -> Generated {
    let mut rng = Rng::new(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let viewer = match rng.below(100) {
        0..=44 => 0,
        45..=59 => 1,
        60..=69 => 2,
        70..=74 => 3,
        75..=84 => 4,
        85..=94 => 5,
        _ => 6,
    };
    debug_assert!(viewer < VIEWERS.len());
    let mut gen = Gen {
        schema,
        fx,
        rng,
        definitions: Vec::new(),
        variables: Map::new(),
        fragments: Vec::new(),
        fragment_texts: Vec::new(),
        keys: HashMap::new(),
        next: 0,
        cost: 0,
        deepest: 0,
        directives: 0,
        aliases: 0,
        fields: 0,
    };
    let body = gen.selections("Query", 0, 1);
    let head = if gen.definitions.is_empty() && gen.rng.chance(30) {
        String::new()
    } else {
        let name = ["", "Page ", "FeedPage ", "q "][gen.rng.below(4)];
        let vars = if gen.definitions.is_empty() {
            String::new()
        } else {
            format!("({})", gen.definitions.join(", "))
        };
        format!("query {name}{vars}")
    };
    let mut document = format!("{head}{body}");
    for fragment in &gen.fragment_texts {
        document.push('\n');
        document.push_str(fragment);
    }
    Generated {
        document,
        variables: Value::Object(gen.variables),
        viewer,
    }
}

/// How many times a list field repeats its selection, by the server's
/// cost count: the page or list size asked, or the default.
fn repeats(field: &Field, args: &[(String, Value)]) -> u64 {
    let size = args
        .iter()
        .filter(|(name, _)| name == "first" || name == "last")
        .filter_map(|(_, v)| v.as_i64())
        .max();
    let has_size = field
        .args
        .iter()
        .any(|a| a.name == "first" || a.name == "last");
    if has_size {
        return match size {
            Some(n) if (0..=100).contains(&n) => n.max(1) as u64,
            Some(n) if n > 100 => 200,
            _ => 25,
        };
    }
    let ids = args.iter().find_map(|(name, value)| match value {
        Value::Array(ids) if ["ids", "actionIds"].contains(&name.as_str()) => Some(ids.len()),
        _ => None,
    });
    if let Some(n) = ids {
        return n.max(1) as u64;
    }
    let list = matches!(
        field.ty.base,
        async_graphql::parser::types::BaseType::List(_)
    );
    match field.name.as_str() {
        // A user's groups (at most 100), the tenant's webhooks (at most 16).
        "groups" if list => 100,
        "webhooks" if list => 16,
        _ => 1,
    }
}

impl Gen<'_> {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// ` @include(…)` or ` @skip(…)`, now and then.
    fn directive(&mut self) -> String {
        if self.directives >= MOST_DIRECTIVES || !self.rng.chance(12) {
            return String::new();
        }
        self.directives += 1;
        let which = if self.rng.chance(50) {
            "include"
        } else {
            "skip"
        };
        let value = self.rng.chance(50);
        if self.rng.chance(60) {
            let name = self.fresh("b");
            self.definitions.push(format!("${name}: Boolean!"));
            self.variables.insert(name.clone(), Value::Bool(value));
            format!(" @{which}(if: ${name})")
        } else {
            format!(" @{which}(if: {value})")
        }
    }

    /// An argument's text: a literal, or a variable declared with its type.
    fn argument(&mut self, name: &str, ty: &Type, value: &Value) -> String {
        if !self.rng.chance(45) {
            return format!("{name}: {}", values::literal(value, ty, self.schema));
        }
        let var = self.fresh("v");
        let mut declared = ty.to_string();
        if ty.nullable && !value.is_null() && self.rng.chance(20) {
            declared.push('!');
        }
        if !value.is_null() && self.rng.chance(10) {
            let default = values::literal(value, ty, self.schema);
            self.definitions
                .push(format!("${var}: {declared} = {default}"));
        } else {
            self.definitions.push(format!("${var}: {declared}"));
            self.variables.insert(var.clone(), value.clone());
        }
        format!("{name}: ${var}")
    }

    /// The key a field is answered under: its name where that is
    /// unambiguous in the document, else an alias of its own.
    fn key(&mut self, field: &str, signature: String, has_args: bool) -> Option<String> {
        let plain = match self.keys.get(field) {
            None => true,
            Some(seen) => !has_args && *seen == signature,
        };
        if plain && (self.aliases >= MOST_ALIASES || !self.rng.chance(20)) {
            self.keys.insert(field.to_owned(), signature);
            Some(field.to_owned())
        } else if self.aliases < MOST_ALIASES {
            self.aliases += 1;
            let alias = self.fresh("k");
            Some(format!("{alias}: {field}"))
        } else {
            None
        }
    }

    /// `__typename` costs a point and counts as a field, as any other.
    fn count_typename(&mut self, mult: u64) {
        self.cost += mult;
        self.fields += 1;
    }

    fn selections(&mut self, ty: &str, depth: usize, mult: u64) -> String {
        let mut items = Vec::new();
        match self.schema.kind(ty) {
            Kind::Object { .. } => {
                let n = 1 + self.rng.below(if depth == 0 { 3 } else { 4 });
                for _ in 0..n {
                    if let Some(item) = self.field(ty, depth, mult) {
                        items.push(item);
                    }
                }
                if self.rng.chance(10) {
                    // async-graphql's validation does not see a variable
                    // used only by a directive of `__typename` (it calls
                    // it unused): literals only there.
                    let directive = match self.rng.below(3) {
                        0 => " @include(if: true)",
                        1 => " @skip(if: false)",
                        _ => "",
                    };
                    self.count_typename(mult);
                    items.push(format!("__typename{directive}"));
                }
            }
            Kind::Interface { .. } => {
                if self.rng.chance(50) {
                    if let Some(item) = self.field(ty, depth, mult) {
                        items.push(item);
                    }
                }
                for object in self.schema.possible(ty) {
                    if depth + 2 <= MAX_DEPTH && self.rng.chance(45) {
                        items.push(self.inline(ty, &object, depth, mult));
                    }
                }
            }
            Kind::Union { members } => {
                if self.rng.chance(50) {
                    self.count_typename(mult);
                    items.push("__typename".to_owned());
                }
                for member in members.clone() {
                    if depth + 2 <= MAX_DEPTH && self.rng.chance(50) {
                        items.push(self.inline(ty, &member, depth, mult));
                    }
                }
            }
            _ => unreachable!("{ty} has no selections"),
        }
        if depth + 2 <= MAX_DEPTH && self.rng.chance(12) {
            let on = self.condition(ty);
            items.push(self.inline(ty, &on, depth, mult));
        }
        if depth < MAX_DEPTH && self.rng.chance(15) {
            if let Some(spread) = self.spread(ty, depth, mult) {
                items.push(spread);
            }
        }
        if items.is_empty() {
            self.count_typename(mult);
            items.push("__typename".to_owned());
        }
        format!("{{ {} }}", items.join(" "))
    }

    /// A type a fragment inside a selection of `ty` may be on: `ty`
    /// itself, an interface or union it belongs to, or one of its
    /// possible types.
    fn condition(&mut self, ty: &str) -> String {
        let mut choices = vec![ty.to_owned()];
        choices.extend(self.schema.abstracts_of(ty));
        if !matches!(self.schema.kind(ty), Kind::Object { .. }) {
            choices.extend(self.schema.possible(ty));
        }
        self.rng.pick(&choices).clone()
    }

    /// An inline fragment on `on` inside a selection of `parent`; without
    /// a type condition now and then when `on` is `parent`.
    fn inline(&mut self, parent: &str, on: &str, depth: usize, mult: u64) -> String {
        let directive = self.directive();
        // Levels of its own to the parser, which refuses to recurse past
        // 32 (a fragment, its selection set, its selection).
        let body = self.selections(on, depth + 2, mult);
        if self.rng.chance(10) && on == parent {
            return format!("...{directive} {body}");
        }
        format!("... on {on}{directive} {body}")
    }

    /// A named fragment spread here: one written before that fits, or a
    /// new one.
    fn spread(&mut self, ty: &str, depth: usize, mult: u64) -> Option<String> {
        let possible = self.schema.possible(ty);
        let fits: Vec<usize> = (0..self.fragments.len())
            .filter(|&i| {
                let f = &self.fragments[i];
                self.schema
                    .possible(&f.on)
                    .iter()
                    .any(|p| possible.contains(p))
                    && depth + f.depth <= MAX_DEPTH
                    && self.cost + f.unit * mult <= BUDGET
                    && self.fields + f.fields <= MOST_FIELDS
            })
            .collect();
        let directive = self.directive();
        if !fits.is_empty() && self.rng.chance(60) {
            let i = *self.rng.pick(&fits);
            self.cost += self.fragments[i].unit * mult;
            self.fields += self.fragments[i].fields;
            return Some(format!("...{}{directive}", self.fragments[i].name));
        }
        let on = self.condition(ty);
        let name = self.fresh("F");
        let (cost, deepest, fields) = (self.cost, self.deepest, self.fields);
        self.deepest = depth;
        let body = self.selections(&on, depth, mult);
        let unit = (self.cost - cost).div_ceil(mult);
        let below = self.deepest - depth;
        self.deepest = self.deepest.max(deepest);
        self.fragment_texts
            .push(format!("fragment {name} on {on} {body}"));
        self.fragments.push(Fragment {
            name: name.clone(),
            on,
            unit,
            depth: below,
            fields: self.fields - fields,
        });
        Some(format!("...{name}{directive}"))
    }

    fn field(&mut self, ty: &str, depth: usize, mult: u64) -> Option<String> {
        let schema = self.schema;
        let candidates: Vec<&Field> = schema
            .fields(ty)
            .iter()
            .filter(|f| ty != "Query" || READ_ROOTS.contains(&f.name.as_str()))
            .filter(|f| !schema.is_composite(named(&f.ty)) || depth + 1 < MAX_DEPTH)
            .collect();
        if candidates.is_empty() || self.fields >= MOST_FIELDS || self.cost + mult > BUDGET {
            return None;
        }
        let field = *self.rng.pick(&candidates);
        let mut args: Vec<(String, Value)> = Vec::new();
        for arg in &field.args {
            if (arg.ty.nullable || arg.has_default) && !self.rng.chance(55) {
                continue;
            }
            let value = values::random(
                schema,
                self.fx,
                &mut self.rng,
                &field.name,
                &arg.name,
                &arg.ty,
            );
            args.push((arg.name.clone(), value));
        }
        let mut times = repeats(field, &args);
        if mult * times > MOST_REPEATS {
            for (name, value) in &mut args {
                if name == "first" || name == "last" {
                    *value = Value::from(self.rng.below(4) as i64);
                }
            }
            times = repeats(field, &args);
            if mult * times > MOST_REPEATS {
                return None;
            }
        }
        let inner = mult * times;
        let composite = schema.is_composite(named(&field.ty));
        if composite && self.cost + mult + inner * 2 > BUDGET {
            return None;
        }
        let key = self.key(
            &field.name,
            format!("{}{args:?}", field.ty),
            !args.is_empty(),
        )?;
        self.fields += 1;
        self.cost += mult;
        self.deepest = self.deepest.max(depth + 1);
        let arg_text: Vec<String> = args
            .iter()
            .map(|(name, value)| {
                let ty = &field
                    .args
                    .iter()
                    .find(|a| &a.name == name)
                    .expect("an arg")
                    .ty;
                self.argument(name, ty, value)
            })
            .collect();
        let arg_text = if arg_text.is_empty() {
            String::new()
        } else {
            format!("({})", arg_text.join(", "))
        };

        let directive = self.directive();
        let sub = if composite {
            format!(" {}", self.selections(named(&field.ty), depth + 1, inner))
        } else {
            String::new()
        };
        Some(format!("{key}{arg_text}{directive}{sub}"))
    }
}

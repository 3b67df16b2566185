//! `schema` — the JSON Schema of one archived line of the table (README, "Reading the archive
//! elsewhere"): a document printed as it is, from the table's description alone.

use crate::model::command::CommandName;
use crate::model::table::TableSpec;
use crate::pipeline::report::{Document, Summary};

pub(crate) fn run(spec: &'static TableSpec) -> Summary {
    let mut summary = Summary::new(CommandName::Schema);
    summary.table = Some(spec.name.to_string());
    summary.document = Some(Document::Text(crate::model::record_schema::to_text(spec)));
    summary.settle()
}

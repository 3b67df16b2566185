//! Real services, isolated per test: every test gets its own database on the MariaDB/MySQL
//! server ([`database`]) and its own bucket on a real S3 HTTP server ([`s3`]); [`rows`] builds rows,
//! [`fixtures`] datasets and options; [`binary`] runs the real binary. [`proxy`] (a fault-injecting HTTP proxy) and
//! [`misbehaving`] (an S3 server that misbehaves on purpose) stand in front of the real servers
//! for the fault tests; [`private_server`] is a MariaDB of the test's own to restart and kill;
//! [`moto`] is moto's S3 server, for what s3s does not implement (Object Lock, storage classes,
//! SSE-KMS); [`tls`] is a certificate authority of the test's own and a TLS front for the S3
//! server; [`pushgateway`] a real Prometheus Pushgateway; [`pod`] the image built from
//! `deploy/Dockerfile` and the manifests' pods run in it with podman, as Kubernetes runs them.

#![allow(dead_code)]

pub mod binary;
pub mod database;
pub mod fixtures;
pub mod misbehaving;
pub mod moto;
pub mod pod;
pub mod private_server;
pub mod proxy;
pub mod pushgateway;
pub mod rows;
pub mod s3;
pub mod tls;

pub use binary::*;
pub use database::*;
pub use fixtures::*;
pub use private_server::{PrivateServer, Replicated};
pub use rows::*;
pub use s3::*;

use crate::helpers::{Backend, spawn_app};

/// Every route the server answers is in the document and has its method in the client, and the
/// document's shape is reviewed through a snapshot.
#[tokio::test]
async fn openapi_covers_every_route_and_is_snapshotted() {
    let app = spawn_app(Backend::Sqlite).await;
    let r = app.get("/api/v1/openapi.json").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["openapi"], "3.1.0");
    let paths = r.body["paths"].as_object().cloned().unwrap_or_default();
    // The client's route table (one typed method each) and the served document name the same
    // routes: a route added to one and not the other fails here.
    let mut documented: Vec<(String, String)> = paths
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .into_iter()
                .flat_map(|o| o.keys())
                .map(|method| (method.to_uppercase(), path.clone()))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut client: Vec<(String, String)> = actiongate_client::routes::ALL
        .iter()
        .map(|r| (r.method.as_str().to_owned(), r.path.to_owned()))
        .collect();
    documented.sort();
    client.sort();
    assert_eq!(
        documented, client,
        "the document and the client's routes differ"
    );
    assert_eq!(client.len(), 60);
    insta::assert_json_snapshot!("openapi", r.body);

    // The docs page and its assets are served locally (no CDN).
    let page = app.get("/docs/").await;
    assert_eq!(page.status, 200);
    assert!(
        !page.text.contains("cdn.") && !page.text.contains("unpkg"),
        "docs page loads from a CDN"
    );
    let init = app.get("/docs/swagger-initializer.js").await;
    assert_eq!(init.status, 200);
    assert!(init.text.contains("/api/v1/openapi.json"));
}

//! # magpie-macros
//!
//! `#[magpie_runtime::main]` and `#[magpie_runtime::test]`: turn an
//! `async fn` into a plain `fn` that builds a magpie `Runtime` and runs the
//! body with `block_on`. Use them through `magpie_runtime` (its default
//! feature `macros` re-exports them); the expansion names
//! `::magpie_runtime`.
//!
//! Arguments (both attributes):
//!
//! | argument | meaning | default |
//! | --- | --- | --- |
//! | `worker_threads = N` | `Builder::worker_threads(N)` | `main`: the builder's (the available cores); `test`: 1 |
//! | `start_paused = true` | `Builder::start_paused(true)`: a paused clock that auto-advances when idle | `false` |
//! | `flavor = "current_thread"` | `Builder::new_current_thread()`: no worker threads, the tasks run on the thread in `block_on` (no `worker_threads` then) | |
//! | `flavor = "multi_thread"` | worker threads | the default for both (tokio's `test` defaults to `current_thread`) |
//!
//! ```ignore
//! #[magpie_runtime::main(worker_threads = 2)]
//! async fn main() {
//!     let answer = magpie_runtime::spawn(async { 6 * 7 }).await.unwrap();
//!     assert_eq!(answer, 42);
//! }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ItemFn, Lit, MetaNameValue, ReturnType, Token};

/// Runs an `async fn main` on a magpie `Runtime`:
/// `#[magpie_runtime::main(worker_threads = 2, start_paused = false)]`.
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into(), Kind::Main).into()
}

/// An `async fn` test on a fresh magpie `Runtime` (one worker unless
/// `worker_threads = N`): `#[magpie_runtime::test(start_paused = true)]`.
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into(), Kind::Test).into()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Main,
    Test,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Main => "main",
            Kind::Test => "test",
        }
    }
}

/// The parsed arguments.
#[derive(Default)]
struct Config {
    worker_threads: Option<syn::LitInt>,
    start_paused: Option<syn::LitBool>,
    /// `flavor = "current_thread"`.
    current_thread: Option<syn::LitStr>,
}

fn parse_config(args: TokenStream2) -> syn::Result<Config> {
    let parsed = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(args)?;
    let mut config = Config::default();
    for arg in parsed {
        let name = arg
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        let lit = match &arg.value {
            Expr::Lit(ExprLit { lit, .. }) => lit.clone(),
            other => {
                return Err(syn::Error::new(
                    other.span(),
                    "expected a literal (`worker_threads = 2`, `start_paused = true`)",
                ))
            }
        };
        match (name.as_str(), lit) {
            ("worker_threads", Lit::Int(n)) => {
                if n.base10_parse::<usize>()? == 0 {
                    return Err(syn::Error::new(
                        n.span(),
                        "worker_threads must be at least 1",
                    ));
                }
                config.worker_threads = Some(n);
            }
            ("start_paused", Lit::Bool(b)) => config.start_paused = Some(b),
            ("flavor", Lit::Str(s)) if s.value() == "multi_thread" => {}
            ("flavor", Lit::Str(s)) if s.value() == "current_thread" => {
                config.current_thread = Some(s)
            }
            ("flavor", Lit::Str(s)) => {
                return Err(syn::Error::new(
                    s.span(),
                    "unknown flavor: expected \"multi_thread\" or \"current_thread\"",
                ))
            }
            ("worker_threads" | "start_paused", lit) => {
                return Err(syn::Error::new(
                    lit.span(),
                    "worker_threads takes an integer, start_paused a bool",
                ))
            }
            (_, _) => {
                return Err(syn::Error::new(
                    arg.path.span(),
                    "unknown argument: expected `worker_threads`, `start_paused` or `flavor`",
                ))
            }
        }
    }
    if let (Some(_), Some(n)) = (&config.current_thread, &config.worker_threads) {
        return Err(syn::Error::new(
            n.span(),
            "the `worker_threads` option requires the `multi_thread` runtime flavor",
        ));
    }
    Ok(config)
}

fn expand(args: TokenStream2, item: TokenStream2, kind: Kind) -> TokenStream2 {
    let mut input: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return with_error(item, e),
    };
    let config = match parse_config(args) {
        Ok(c) => c,
        Err(e) => return with_error(quote!(#input), e),
    };
    if input.sig.asyncness.is_none() {
        let e = syn::Error::new(
            input.sig.fn_token.span(),
            format!(
                "the `async` keyword is missing from the function declaration \
                 (#[magpie_runtime::{}] runs an async fn)",
                kind.name()
            ),
        );
        return with_error(quote!(#input), e);
    }
    if kind == Kind::Test && !input.sig.inputs.is_empty() {
        let e = syn::Error::new(
            input.sig.inputs.span(),
            "a test function takes no arguments",
        );
        return with_error(quote!(#input), e);
    }
    input.sig.asyncness = None;

    let builder = match &config.current_thread {
        Some(_) => quote!(::magpie_runtime::Builder::new_current_thread()),
        None => quote!(::magpie_runtime::Runtime::builder()),
    };
    let workers = match (&config.worker_threads, kind, &config.current_thread) {
        (_, _, Some(_)) => quote!(),
        (Some(n), _, None) => quote!(.worker_threads(#n)),
        (None, Kind::Test, None) => quote!(.worker_threads(1)),
        (None, Kind::Main, None) => quote!(),
    };
    let paused = config
        .start_paused
        .as_ref()
        .map(|b| quote!(.start_paused(#b)))
        .unwrap_or_default();
    let output = match &input.sig.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let body = &input.block;
    let span = body.span();
    // Pinning the body as `dyn Future<Output = ...>` fixes its output type,
    // so `?` in the body converts to the declared error type.
    let new_body = quote_spanned! {span=>
        {
            let body = ::core::pin::pin!(async #body);
            let body: ::core::pin::Pin<&mut dyn ::core::future::Future<Output = #output>> = body;
            #builder
                #workers
                #paused
                .build()
                .expect("failed to build the magpie runtime")
                .block_on(body)
        }
    };
    match syn::parse2(new_body) {
        Ok(b) => *input.block = b,
        Err(e) => return with_error(quote!(#input), e),
    }
    let test_attr = if kind == Kind::Test {
        quote!(#[::core::prelude::v1::test])
    } else {
        quote!()
    };
    quote! {
        #test_attr
        #input
    }
}

/// The item unchanged plus the error, so the rest of the crate still
/// type-checks and only the macro's message shows.
fn with_error(item: TokenStream2, e: syn::Error) -> TokenStream2 {
    let e = e.to_compile_error();
    quote! { #item #e }
}

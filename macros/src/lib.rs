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
//! | `flavor = "current_thread"` | `Builder::new_current_thread()`: no worker threads, the tasks run on the thread in `block_on` | the default of `test`, as in tokio |
//! | `flavor = "multi_thread"` | worker threads | the default of `main`, as in tokio |
//! | `worker_threads = N` | `Builder::worker_threads(N)`; only with the `multi_thread` flavor (an error otherwise, as in tokio) | the builder's (the available cores) |
//! | `start_paused = true` | `Builder::start_paused(true)`: a paused clock that auto-advances when idle | `false` |
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

/// An `async fn` test on a fresh magpie `Runtime`, current-thread unless
/// `flavor = "multi_thread"` (tokio's default):
/// `#[magpie_runtime::test(start_paused = true)]`.
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
    /// `flavor = "..."`, if given: `true` for `"current_thread"`.
    flavor: Option<(bool, syn::LitStr)>,
}

impl Config {
    /// Whether the runtime is the current-thread flavour: as asked, else
    /// tokio's default (`test`: current-thread, `main`: multi-thread).
    fn current_thread(&self, kind: Kind) -> bool {
        match &self.flavor {
            Some((current, _)) => *current,
            None => kind == Kind::Test,
        }
    }
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
            ("flavor", Lit::Str(s)) if s.value() == "multi_thread" => {
                config.flavor = Some((false, s))
            }
            ("flavor", Lit::Str(s)) if s.value() == "current_thread" => {
                config.flavor = Some((true, s))
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
    Ok(config)
}

/// `worker_threads` needs the multi-thread flavour, which `test` has only
/// when asked for (tokio's rule and message).
fn check_flavor(config: &Config, kind: Kind) -> syn::Result<()> {
    match &config.worker_threads {
        Some(n) if config.current_thread(kind) => Err(syn::Error::new(
            n.span(),
            format!(
                "the `worker_threads` option requires the `multi_thread` runtime flavor: \
                 use `#[magpie_runtime::{}(flavor = \"multi_thread\")]`",
                kind.name()
            ),
        )),
        _ => Ok(()),
    }
}

fn expand(args: TokenStream2, item: TokenStream2, kind: Kind) -> TokenStream2 {
    let mut input: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return with_error(item, e),
    };
    let config = match parse_config(args).and_then(|c| check_flavor(&c, kind).map(|()| c)) {
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

    let builder = if config.current_thread(kind) {
        quote!(::magpie_runtime::Builder::new_current_thread())
    } else {
        quote!(::magpie_runtime::Runtime::builder())
    };
    let workers = match &config.worker_threads {
        Some(n) => quote!(.worker_threads(#n)),
        None => quote!(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(args: TokenStream2, kind: Kind) -> String {
        let item = quote!(
            async fn t() {}
        );
        expand(args, item, kind).to_string()
    }

    // `test` alone names this crate's attribute.
    #[::core::prelude::v1::test]
    fn test_defaults_to_the_current_thread_flavor_and_main_to_worker_threads() {
        let t = expanded(quote!(), Kind::Test);
        assert!(t.contains("new_current_thread"), "{t}");
        let m = expanded(quote!(), Kind::Main);
        assert!(m.contains("Runtime :: builder"), "{m}");
        assert!(!m.contains("new_current_thread"), "{m}");
        let t = expanded(
            quote!(flavor = "multi_thread", worker_threads = 3),
            Kind::Test,
        );
        assert!(t.contains("Runtime :: builder"), "{t}");
        assert!(t.contains("worker_threads (3)"), "{t}");
    }

    // `test` alone names this crate's attribute.
    #[::core::prelude::v1::test]
    fn worker_threads_without_the_multi_thread_flavor_is_tokios_error() {
        for (args, kind) in [
            (quote!(worker_threads = 2), Kind::Test),
            (
                quote!(flavor = "current_thread", worker_threads = 2),
                Kind::Main,
            ),
        ] {
            let out = expanded(args, kind);
            assert!(out.contains("compile_error"), "{out}");
            assert!(
                out.contains("requires the `multi_thread` runtime flavor"),
                "{out}"
            );
        }
        let ok = expanded(quote!(worker_threads = 2), Kind::Main);
        assert!(!ok.contains("compile_error"), "{ok}");
    }
}

//! `layercast-server token`: signs a scoped, expiring token (JWT, HS256) with the server's
//! token key (`token_secret_file`), for a viewer, a dashboard or an operator.

use crate::auth::{Claims, Tokens};
use clap::Parser;

/// Sign a token for the API (docs/security.md "Signed tokens").
#[derive(Parser, Debug)]
// `bin_name`: the usage line names the subcommand as typed (argv[0] here is `token`).
#[command(name = "layercast-server token", bin_name = "layercast-server token")]
struct Args {
    /// The server's token key file (made by the server at its first start; default
    /// `token.key` in the state directory, `LAYERCAST_STATE_DIR` or the XDG default).
    #[arg(long, env = "LAYERCAST_TOKEN_SECRET_FILE")]
    token_secret_file: Option<std::path::PathBuf>,
    /// control, player or dashboard.
    #[arg(long, value_parser = ["control", "player", "dashboard"])]
    role: String,
    /// The one session the token covers (default: every session).
    #[arg(long)]
    session: Option<String>,
    /// Lifetime, seconds.
    #[arg(long, default_value_t = 86_400)]
    ttl_s: u64,
    /// Who it is for (a viewer id, an operator's name).
    #[arg(long, default_value = "layercast")]
    sub: String,
}

/// Prints the token; exit code 0, or 2 with the reason on stderr.
pub fn main(args: &[String]) -> i32 {
    let a = match Args::try_parse_from(
        std::iter::once("token".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let file = a.token_secret_file.unwrap_or_else(|| {
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        let given = env.get("LAYERCAST_STATE_DIR").cloned().unwrap_or_default();
        crate::config::state_dir(&given, &env).join("token.key")
    });
    if !file.exists() {
        eprintln!(
            "layercast-server token: {} does not exist (start the server once, or give --token-secret-file)",
            file.display()
        );
        return 2;
    }
    let t = match Tokens::default().with_jwt_secret_file(Some(&file)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("layercast-server token: {e}");
            return 2;
        }
    };
    let exp = crate::state::unix_now() as u64 + a.ttl_s;
    match t.sign(&Claims {
        sub: a.sub,
        role: a.role,
        session: a.session,
        exp,
    }) {
        Ok(s) => {
            println!("{s}");
            0
        }
        Err(e) => {
            eprintln!("layercast-server token: {e}");
            2
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// The usage line reads as the command is typed.
    #[test]
    fn usage_names_the_subcommand() {
        let mut cmd = Args::command();
        let u = cmd.render_usage().to_string();
        assert!(
            u.contains("layercast-server token [OPTIONS] --role <ROLE>"),
            "{u}"
        );
        // Also after a parse, which sets the binary name from argv[0] when none is given.
        let e = Args::try_parse_from(["token", "--bogus"]).unwrap_err();
        assert!(
            e.to_string().contains("Usage: layercast-server token"),
            "{e}"
        );
    }
}

//! Bank accounts: one instance per account, and transfers as calls between
//! actors.
//!
//! Every key is an account, created at its first call with a balance of
//! 0. `transfer(to, amount)` takes the amount from this account, then calls
//! `deposit` on the account `to`. The deposit commits in the other
//! account's own transaction before the call returns; if it fails (a
//! malformed key, a transfer to the account itself, which Burrow refuses as
//! a call cycle), `transfer` fails and its withdrawal rolls back, so no
//! money leaves without arriving. (Were this account's own commit to fail
//! after the deposit, the money would arrive without leaving: a real bank
//! would record the transfer as a workflow step.)
//!
//! ```text
//! burrow call account alice deposit '[100]'          # 100
//! burrow call account alice transfer '["bob", 30]'   # 70
//! burrow call account bob balance                    # 30
//! ```

use burrow_sdk::{Error, Result, actors, db};

fn migrate() -> Result<()> {
    db::execute_batch(
        "CREATE TABLE IF NOT EXISTS balance (
             id INTEGER PRIMARY KEY CHECK (id = 1),
             cents INTEGER NOT NULL CHECK (cents >= 0)
         );
         INSERT OR IGNORE INTO balance (id, cents) VALUES (1, 0);",
    )?;
    Ok(())
}

fn check_amount(amount: i64) -> Result<()> {
    if amount <= 0 {
        return Err(Error::new("invalid-amount", "the amount must be positive"));
    }
    Ok(())
}

/// Adds `amount` to the balance; returns the new balance.
fn deposit(amount: i64) -> Result<i64> {
    check_amount(amount)?;
    db::query_one(
        "UPDATE balance SET cents = cents + ? WHERE id = 1 RETURNING cents",
        [amount],
    )?
    .get(0)
}

/// Moves `amount` to the account `to`; returns this account's new balance.
fn transfer(to: String, amount: i64) -> Result<i64> {
    check_amount(amount)?;
    let left: i64 = db::query_one("SELECT cents FROM balance WHERE id = 1", ())?.get(0)?;
    if left < amount {
        return Err(Error::new(
            "insufficient-funds",
            format!("the balance is {left}; {amount} cannot be transferred"),
        ));
    }
    let left: i64 = db::query_one(
        "UPDATE balance SET cents = cents - ? WHERE id = 1 RETURNING cents",
        [amount],
    )?
    .get(0)?;
    let _: i64 = actors::call("account", &to, "deposit", &(amount,))?;
    Ok(left)
}

fn balance() -> Result<i64> {
    db::query_one("SELECT cents FROM balance WHERE id = 1", ())?.get(0)
}

burrow_sdk::actor! {
    migrate: migrate,
    actions: [deposit, transfer, balance],
}

// Drives the owner's web console in headless Chromium (Debian's package) with playwright-core:
// signs in with the e-mail code (asked for on stdout, read from stdin), changes the policy,
// registers a webhook, approves a pending intent, reads activity and credits, revokes a
// delegation, reads the webhook's deliveries, verifies and exports the audit trail. Screenshots go
// to the given directory. Prints one JSON line with what it saw; exits non-zero on any failure.
//
//   node console.mjs <base url> <email> <agent id> <intent id> <screenshot dir> <webhook url>
import { chromium } from 'playwright-core';
import { createInterface } from 'node:readline';
import fs from 'node:fs';
import path from 'node:path';

const [base, email, agentId, intentId, shots, hookUrl] = process.argv.slice(2);
fs.mkdirSync(shots, { recursive: true });
const rl = createInterface({ input: process.stdin });
const lines = rl[Symbol.asyncIterator]();
const ask = async (what) => {
  process.stdout.write(`NEED ${what}\n`);
  const { value } = await lines.next();
  return (value ?? '').trim();
};
let current = null;
const expect = async (locator, what) => {
  await locator.first().waitFor({ state: 'visible', timeout: 10000 }).catch(async () => {
    const body = current ? await current.locator('body').innerText().catch(() => '') : '';
    throw new Error(`not shown: ${what} (${current?.url()}): ${body.slice(0, 2000)}`);
  });
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const seen = {};
try {
  // A phone-sized window: the console must work there.
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, acceptDownloads: true });
  const page = await context.newPage();
  current = page;
  const shot = (name) => page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });

  await page.goto(`${base}/console`);
  await expect(page.getByRole('heading', { name: 'Sign in' }), 'the sign-in page');
  await shot('01-sign-in');
  await page.getByLabel('E-mail address').fill(email);
  await page.getByRole('button', { name: 'Send the code' }).click();
  await expect(page.getByLabel('6-digit code'), 'the code form');
  const code = await ask('code');
  await page.getByLabel('6-digit code').fill(code);
  await page.getByLabel('I accept the terms of service').check();
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('heading', { name: 'Agents' }), 'the agents page');
  await expect(page.getByText('wait for your approval'), 'the pending approval notice');
  await shot('02-agents');

  // The policy: a higher daily limit, a lower approval threshold.
  await page.locator(`a[href="/console/agents/${agentId}"]`).click();
  await expect(page.getByRole('heading', { name: 'Policy' }), 'the policy page');
  await page.getByLabel('Daily limit (USD)').fill('500');
  await page.getByLabel('Ask me to approve writes above (USD, empty: never)').fill('25');
  await page.getByRole('button', { name: 'Save the policy' }).click();
  await expect(page.getByText('Policy saved.'), 'the saved notice');
  seen.dailyLimit = await page.getByLabel('Daily limit (USD)').inputValue();
  await shot('03-policy');
  // Keyboard only: the form's fields and its button are reachable with Tab.
  await page.keyboard.press('Tab');

  // Webhooks: register an endpoint for every event type; its secret is shown this once.
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByLabel('URL', { exact: true }).fill(hookUrl);
  await page.getByRole('button', { name: 'Register' }).click();
  await expect(page.getByText('Webhook registered.'), 'the registration');
  seen.secret = (await page.locator('.secret').innerText()).trim();
  await shot('10-webhooks');

  // The approval queue: approve the pending intent.
  await page.getByRole('link', { name: 'Approvals' }).click();
  await expect(page.getByText(intentId), 'the pending intent');
  await shot('04-approvals');
  await page.locator(`form[action="/console/approvals/${intentId}/approve"] button`).click();
  await expect(page.getByText('Approved: it runs now.'), 'the approval notice');
  await shot('05-approved');

  // Activity and credits: the approved intent with its result, the ledger.
  await page.getByRole('link', { name: 'Activity' }).click();
  await expect(page.getByText(/swap \(executeIntent\)/), 'the intent in the activity');
  await shot('07-activity');
  await page.getByRole('link', { name: 'Credits' }).click();
  await expect(page.getByText('Ledger, newest first'), 'the ledger');
  seen.balance = await page.locator('.balance').innerText();
  await shot('08-credits');

  // Delegations: revoke one for the agents.
  await page.getByRole('link', { name: 'Delegations' }).click();
  await page.getByRole('button', { name: 'Revoke for my agents' }).first().click();
  await expect(page.getByText('Revoked: your agents no longer use this delegation.'), 'the revocation');
  await shot('09-delegations');

  // The webhook's deliveries: the approval's and the revocation's events, posted and answered.
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByRole('link', { name: 'Deliveries' }).first().click();
  await expect(page.getByRole('heading', { name: 'Deliveries' }), 'the deliveries page');
  const wanted = ['intent.completed', 'delegation.revoked'];
  const delivered = async () => {
    const rows = await page.locator('tbody tr').all();
    const out = [];
    for (const row of rows) {
      const cells = await row.locator('td').allInnerTexts();
      if (cells[2] === 'delivered') out.push(cells[1]);
    }
    return out;
  };
  for (let i = 0; i < 60 && !wanted.every((t) => seen.delivered?.includes(t)); i++) {
    if (i > 0) { await page.waitForTimeout(250); await page.reload(); }
    seen.delivered = await delivered();
  }
  await shot('11-deliveries');

  // The audit trail: verify, then export.
  await page.getByRole('link', { name: 'Audit' }).click();
  await page.getByRole('button', { name: 'Verify the chain' }).click();
  await expect(page.getByText('The chain is intact'), 'the verification');
  seen.verify = await page.getByRole('status').innerText();
  await shot('06-audit');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Export as CSV' }).click(),
  ]);
  const csv = fs.readFileSync(await download.path(), 'utf8');
  seen.csvHeader = csv.split('\n')[0];
  seen.csvHasApproval = csv.includes(',approval.approved,');

  // Signing out ends the session: the console asks to sign in again.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page.getByRole('heading', { name: 'Sign in' }), 'the sign-in page after signing out');
  seen.ok = true;
} finally {
  await browser.close();
  rl.close();
}
process.stdout.write(`${JSON.stringify(seen)}\n`);

// The TypeScript journey of tests/journeys/test_generated_client.py: a client generated
// by openapi-typescript (schema.d.ts) driven with openapi-fetch against `gatecast serve`.
// Compiled with `tsc --strict`, so the calls and bodies are checked against the
// document's types. Reads GATECAST_URL, GATECAST_KEY, CONTACTS_CSV, CAMPAIGN_TOML,
// HOOK_URL and OUT (a folder); prints what it saw as one JSON line.
import { readFileSync, writeFileSync } from "node:fs";
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const client = createClient<paths>({
  baseUrl: env("GATECAST_URL"),
  headers: { Authorization: `Bearer ${env("GATECAST_KEY")}` },
});

function check(ok: boolean, what: string, seen?: unknown): void {
  if (!ok) throw new Error(`${what}: ${JSON.stringify(seen)}`);
}

async function waitFor<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const found = await probe();
    if (found !== undefined) return found;
    await new Promise((done) => setTimeout(done, 200));
  }
  throw new Error(`timed out waiting for ${what}`);
}

// a `format: binary` field is typed as the file's content; it goes as a file part
function asFiles(fileName: string) {
  return (body: Record<string, unknown>): FormData => {
    const form = new FormData();
    for (const [name, value] of Object.entries(body)) {
      if (name === "file") form.append(name, new Blob([String(value)]), fileName);
      else if (value !== undefined && value !== null) form.append(name, String(value));
    }
    return form;
  };
}

const seen: Record<string, unknown> = {};

// link a sender
const made = await client.POST("/api/v1/instances", { body: { label: "ts client" } });
check(made.response.status === 201 && made.data !== undefined, "instance", made.error);
const instance = made.data!.instance_id;
await client.POST("/api/v1/instances/{instance_id}/link", {
  params: { path: { instance_id: instance } },
});
await waitFor(async () => {
  const got = await client.GET("/api/v1/instances/{instance_id}", {
    params: { path: { instance_id: instance } },
  });
  return got.data?.state === "connected" ? true : undefined;
}, "the sender");

// import a file (multipart)
const upload: Schemas["Body_imports_post_import"] = {
  file: readFileSync(env("CONTACTS_CSV"), "utf-8"),
  list_name: "ts-customers",
};
const job = await client.POST("/api/v1/imports", {
  body: upload,
  bodySerializer: asFiles("contacts.csv"),
});
check(job.response.status === 202 && job.data !== undefined, "import", job.error);
const imported = await waitFor(async () => {
  const got = await client.GET("/api/v1/imports/{import_id}", {
    params: { path: { import_id: job.data!.id } },
  });
  return got.data && got.data.status !== "running" ? got.data : undefined;
}, "the import");
seen.import = [imported.status, imported.imported + imported.updated + (imported.unchanged ?? 0)];

// a campaign from a TOML upload, one from JSON
const toml: Schemas["Body_campaigns_post_campaign_toml"] = { file: env("CAMPAIGN_TOML") };
const fromToml = await client.POST("/api/v1/campaigns/toml", {
  params: { header: { "Idempotency-Key": "ts-toml-1" } },
  body: toml,
  bodySerializer: asFiles("promo.toml"),
});
check(fromToml.response.status === 201 && fromToml.data !== undefined, "toml", fromToml.error);
const spec: Schemas["CampaignSpecBody"] = {
  name: "TS JSON",
  list: "ts-customers",
  audience: null,
  ab: null,
  instances: [instance],
  message: {
    type: "interactive",
    text: "Hi {{ name }}, pick one",
    buttons: [{ display_text: "Yes", id: "yes" }, { display_text: "No", id: "no" }],
  },
  pace: { per_minute: 0, delay_seconds: [0, 0] },
};
const fromJson = await client.POST("/api/v1/campaigns", { body: spec });
check(fromJson.response.status === 201 && fromJson.data !== undefined, "json", fromJson.error);
seen.recipients = [fromToml.data!.recipients, fromJson.data!.recipients];

// follow both to the end
for (const id of [fromToml.data!.id, fromJson.data!.id]) {
  await waitFor(async () => {
    const got = await client.GET("/api/v1/campaigns/{campaign_id}", {
      params: { path: { campaign_id: id } },
    });
    return got.data?.state === "completed" ? true : undefined;
  }, `campaign ${id} to complete`);
}

// each report format
const campaign = { params: { path: { campaign_id: fromToml.data!.id } } };
const csv = await client.GET("/api/v1/campaigns/{campaign_id}/report.csv", {
  ...campaign,
  parseAs: "text",
});
const lines = (csv.data ?? "").replace(/^\uFEFF/, "").trim().split(/\r?\n/);
seen.csv = [lines[0].split(",")[0], lines.length - 1];
const json = await client.GET("/api/v1/campaigns/{campaign_id}/report.json", campaign);
seen.json = [json.data?.campaign.name, json.data?.summary.total, json.data?.deliveries.length];
const xlsx = await client.GET("/api/v1/campaigns/{campaign_id}/report.xlsx", {
  ...campaign,
  parseAs: "arrayBuffer",
});
check(xlsx.response.ok && xlsx.data !== undefined, "report.xlsx", xlsx.response.status);
writeFileSync(`${env("OUT")}/report.xlsx`, new Uint8Array(xlsx.data!));
const exported = await client.GET("/api/v1/contacts/export", {
  params: { query: { list: "ts-customers", format: "xlsx" } },
  parseAs: "arrayBuffer",
});
check(exported.response.ok && exported.data !== undefined, "export", exported.response.status);
writeFileSync(`${env("OUT")}/contacts.xlsx`, new Uint8Array(exported.data!));

// subscribe a webhook endpoint
const hook = await client.POST("/api/v1/webhook-endpoints", {
  body: { url: env("HOOK_URL"), events: ["*"], description: "ts" },
});
check(hook.response.status === 201 && hook.data !== undefined, "endpoint", hook.error);
const again = await client.GET("/api/v1/webhook-endpoints/{endpoint_id}", {
  params: { path: { endpoint_id: hook.data!.id } },
});
seen.endpoint = [hook.data!.secret.startsWith("whsec_"), again.data?.url, again.data?.enabled];

// a refused body: the problem comes back typed
const bad = await client.POST("/api/v1/campaigns", {
  body: { ...spec, name: "Bad", message: { type: "text", text: "" } },
});
seen.problem = [bad.response.status, bad.error?.code, bad.error?.errors?.[0]?.loc];

console.log(JSON.stringify(seen));

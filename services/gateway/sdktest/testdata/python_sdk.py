# Drives the gateway with Python's unmodified azure-mgmt-scheduler (Debian's python3-azure:
# 7.0.0b1, generated from the swagger, on azure-core and msrest), as a Python user of Azure
# Scheduler does. Run by TestPythonSDKDrivesTheGateway, which checks what it prints: one JSON
# object of what the client read. Any answer the client cannot read raises, and fails the test.
#
# usage: python3 python_sdk.py <gateway URL> <token> <target URL> <base64 PFX> <PFX password>
# The gateway's CA is in REQUESTS_CA_BUNDLE.
import datetime
import json
import sys
import time

from azure.core.credentials import AccessToken
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.scheduler import SchedulerManagementClient
from azure.mgmt.scheduler import models as m

base, token, target, pfx, pfx_password = sys.argv[1:6]


class StaticToken:
    """A TokenCredential giving the gateway's static token, as a credential of the issuer would."""

    def get_token(self, *scopes, **kwargs):
        return AccessToken(token, int(time.time()) + 3600)


client = SchedulerManagementClient(StaticToken(), "sub-1", base_url=base)
seen = {}

coll = client.job_collections.create_or_update("rg-py", "py-orders", m.JobCollectionDefinition(
    location="West Europe", properties=m.JobCollectionProperties(sku=m.Sku(name="Standard"))))
seen["collection"] = {"id": coll.id, "state": coll.properties.state,
                      "maxJobCount": coll.properties.quota.max_job_count}
seen["collections"] = [c.name for c in client.job_collections.list_by_resource_group("rg-py")]

retry = m.RetryPolicy(retry_type="Fixed", retry_interval=datetime.timedelta(seconds=30), retry_count=2)
error_action = m.JobErrorAction(
    type="ServiceBusQueue",
    service_bus_queue_message=m.ServiceBusQueueMessage(
        namespace="py-namespace", queue_name="failures", message="failed", transport_type="AMQP",
        authentication=m.ServiceBusAuthentication(type="SharedAccessKey", sas_key_name="send", sas_key="sas-secret-py"),
        brokered_message_properties=m.ServiceBusBrokeredMessageProperties(
            time_to_live=datetime.timedelta(minutes=10), content_type="text/plain")))
start = datetime.datetime.now(datetime.timezone.utc).replace(second=0, microsecond=0) + datetime.timedelta(days=1)
job = client.jobs.create_or_update("rg-py", "py-orders", "nightly", m.JobDefinition(properties=m.JobProperties(
    start_time=start,
    action=m.JobAction(type="Http", request=m.HttpRequest(uri=target + "/py", method="POST", body="from python",
                                                          headers={"Content-Type": "text/plain"}),
                       retry_policy=retry, error_action=error_action),
    recurrence=m.JobRecurrence(frequency="Day", interval=1, schedule=m.JobRecurrenceSchedule(hours=[3], minutes=[30])))))
seen["created"] = {"name": job.name, "state": job.properties.state,
                   "retryInterval": job.properties.action.retry_policy.retry_interval.total_seconds()}

client.jobs.create_or_update("rg-py", "py-orders", "certificate", m.JobDefinition(properties=m.JobProperties(
    start_time=start,
    action=m.JobAction(type="Https", request=m.HttpRequest(
        uri="https://example.invalid/cert", method="GET",
        authentication=m.ClientCertAuthentication(type="ClientCertificate", pfx=pfx, password=pfx_password)),
        retry_policy=m.RetryPolicy(retry_type="None")),
    recurrence=m.JobRecurrence(frequency="Hour", interval=1))))
cert = client.jobs.get("rg-py", "py-orders", "certificate").properties.action.request.authentication
seen["certificate"] = {"type": cert.type, "subject": cert.certificate_subject_name,
                       "expires": cert.certificate_expiration_date.isoformat() if cert.certificate_expiration_date else None,
                       "pfxShown": cert.pfx is not None or cert.password is not None}

# The last Friday of each month: read, then put back as read (a read-modify-write).
client.jobs.create_or_update("rg-py", "py-orders", "last-friday", m.JobDefinition(properties=m.JobProperties(
    start_time=start,
    action=m.JobAction(type="Http", request=m.HttpRequest(uri=target + "/monthly", method="GET"),
                       retry_policy=m.RetryPolicy(retry_type="None")),
    recurrence=m.JobRecurrence(frequency="Month", schedule=m.JobRecurrenceSchedule(
        monthly_occurrences=[m.JobRecurrenceScheduleMonthlyOccurrence(day="Friday", occurrence=-1)], hours=[9], minutes=[0])))))
monthly = client.jobs.get("rg-py", "py-orders", "last-friday")
before = monthly.properties.status.next_execution_time
monthly.properties.status = None
again = client.jobs.create_or_update("rg-py", "py-orders", "last-friday", monthly)
seen["lastFriday"] = {
    "occurrences": [[o.day, o.occurrence] for o in monthly.properties.recurrence.schedule.monthly_occurrences],
    "nextBefore": before.isoformat(), "nextAfter": again.properties.status.next_execution_time.isoformat(),
    "occurrencesAfter": [[o.day, o.occurrence] for o in again.properties.recurrence.schedule.monthly_occurrences],
}
client.jobs.delete("rg-py", "py-orders", "last-friday")

got = client.jobs.get("rg-py", "py-orders", "nightly")
props = got.properties
sb = props.action.error_action.service_bus_queue_message
seen["got"] = {
    "retryInterval": props.action.retry_policy.retry_interval.total_seconds(),
    "retryCount": props.action.retry_policy.retry_count,
    "timeToLive": sb.brokered_message_properties.time_to_live.total_seconds(),
    "sasKeyShown": sb.authentication.sas_key is not None,
    "startTime": props.start_time.isoformat(),
    "hours": props.recurrence.schedule.hours,
    "next": props.status.next_execution_time.isoformat() if props.status.next_execution_time else None,
}

client.jobs.run("rg-py", "py-orders", "nightly")
history = []
for _ in range(100):
    history = list(client.jobs.list_job_history("rg-py", "py-orders", "nightly"))
    if history:
        break
    time.sleep(0.1)
seen["history"] = [{"status": h.properties.status, "action": h.properties.action_name,
                    "expected": h.properties.expected_execution_time.isoformat()} for h in history]
seen["completed"] = len(list(client.jobs.list_job_history("rg-py", "py-orders", "nightly", filter="status eq 'Completed'")))

# As PowerShell does: the whole definition read, changed, and sent back as a PATCH, without
# the secrets it was answered without (the error action's SAS key), which the PATCH keeps.
got.properties.state = "Disabled"
patched = client.jobs.patch("rg-py", "py-orders", "nightly", got)
seen["patched"] = {"state": patched.properties.state,
                   "retryInterval": patched.properties.action.retry_policy.retry_interval.total_seconds()}
seen["disabled"] = [j.name for j in client.jobs.list("rg-py", "py-orders", filter="state eq 'Disabled'")]
seen["jobs"] = sorted(j.name for j in client.jobs.list("rg-py", "py-orders", top=1))

client.job_collections.begin_disable("rg-py", "py-orders").result()
seen["collectionDisabled"] = client.job_collections.get("rg-py", "py-orders").properties.state
client.job_collections.begin_enable("rg-py", "py-orders").result()

client.jobs.delete("rg-py", "py-orders", "nightly")
try:
    client.jobs.get("rg-py", "py-orders", "nightly")
    seen["deletedJob"] = "still there"
except ResourceNotFoundError:
    seen["deletedJob"] = "not found"
client.job_collections.begin_delete("rg-py", "py-orders").result()
seen["collectionsAfter"] = [c.name for c in client.job_collections.list_by_resource_group("rg-py")]

print(json.dumps(seen))

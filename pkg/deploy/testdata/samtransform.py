"""Transform template.yaml with SAM's own translator (samtranslator, which
cfn-lint installs) once per value of the timeout parameters, and print, per
value, the API deployment's logical IDs and each streamed route's integration
timeout with the parameter resolved. CloudFormation deploys the API again
only when the deployment's logical ID changes, so a parameter that changes an
integration timeout without changing the ID never reaches API Gateway.

usage: python3 samtransform.py template.yaml VALUE...
"""
import json
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """The template names no AWS managed policy: nothing to look up."""

    def load(self):
        return {}


def resolve(v, params, mappings):
    if isinstance(v, dict) and "Ref" in v and v["Ref"] in params:
        return params[v["Ref"]]
    if isinstance(v, dict) and "Fn::FindInMap" in v:
        m, top, second = (resolve(a, params, mappings) for a in v["Fn::FindInMap"])
        return mappings[m][str(top)][second]
    return v


def main():
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    text = open(sys.argv[1]).read()
    out = {}
    for value in sys.argv[2:]:
        tmpl = yaml_parse(text)
        for res in tmpl["Resources"].values():
            if res.get("Type") == "AWS::Serverless::Function":
                res["Properties"]["CodeUri"] = "s3://artifacts/function.zip"  # what sam deploy uploads
        mappings = tmpl.get("Mappings", {})
        params = {"ChatTimeout": value, "PassthroughTimeout": value}
        res = transform(tmpl, params, NoManagedPolicies())
        deployments = sorted(k for k, r in res["Resources"].items() if r["Type"] == "AWS::ApiGateway::Deployment")
        api = [r for r in res["Resources"].values() if r["Type"] == "AWS::ApiGateway::RestApi"][0]
        timeouts = {}
        for path, methods in api["Properties"]["Body"]["paths"].items():
            for method, op in methods.items():
                integ = op.get("x-amazon-apigateway-integration", {})
                if integ.get("responseTransferMode") == "STREAM":
                    timeouts[method.upper() + " " + path] = resolve(integ.get("timeoutInMillis"), params, mappings)
        out[value] = {"deployments": deployments, "timeouts": timeouts}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
